//! The PMI-1 client against fake servers that misbehave: every failure is a clear, typed error
//! within the deadline, never a hang or a panic.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::Duration;

use circulant::bootstrap::{
    Bootstrap, BootstrapError, BootstrapOptions, NodeSource, ServerAddress,
};
use common::{bin, circulant, run};

/// What the fake server does after reading one request line.
enum Step {
    /// Expect a request whose `cmd` is this, and answer with these bytes.
    Reply(&'static str, Vec<u8>),
    /// Expect a request, answer nothing, keep the connection open for a while.
    Silent(&'static str),
    /// Close the connection without reading anything more.
    Close,
}

fn reply(cmd: &'static str, line: &str) -> Step {
    Step::Reply(cmd, line.as_bytes().to_vec())
}

/// The five exchanges of a healthy start-up.
fn startup() -> Vec<Step> {
    vec![
        reply(
            "init",
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
        ),
        reply(
            "get_maxes",
            "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n",
        ),
        reply("get_appnum", "cmd=appnum appnum=0\n"),
        reply("get_my_kvsname", "cmd=my_kvsname kvsname=kvs_test\n"),
        // The launcher's process mapping, which this server does not keep.
        reply(
            "get",
            "cmd=get_result rc=-1 msg=key_not_found value=unknown\n",
        ),
    ]
}

/// Serves `steps` on the first connection to a loopback port; returns the port and a handle
/// yielding every request line received.
fn fake_server(steps: Vec<Step>) -> (String, thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let address = listener.local_addr().expect("address").to_string();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        serve(stream, steps)
    });
    (address, handle)
}

fn serve<S: std::io::Read + Write>(stream: S, steps: Vec<Step>) -> Vec<String> {
    let mut reader = BufReader::new(stream);
    let mut seen = Vec::new();
    for step in steps {
        if let Step::Close = step {
            return seen;
        }
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push(line.trim_end().to_owned());
        match step {
            Step::Reply(cmd, bytes) => {
                assert!(
                    line.starts_with(&format!("cmd={cmd}")),
                    "expected `{cmd}`, client sent {line:?}"
                );
                if reader.get_mut().write_all(&bytes).is_err() {
                    break;
                }
            }
            Step::Silent(cmd) => {
                assert!(line.starts_with(&format!("cmd={cmd}")), "got {line:?}");
                thread::sleep(Duration::from_secs(1));
            }
            Step::Close => unreachable!(),
        }
    }
    // Anything the client still sends before closing.
    let mut rest = String::new();
    while reader.read_line(&mut rest).unwrap_or(0) > 0 {
        seen.push(rest.trim_end().to_owned());
        rest.clear();
    }
    seen
}

fn options(timeout_ms: u64) -> BootstrapOptions {
    BootstrapOptions {
        timeout: Duration::from_millis(timeout_ms),
        allow_singleton: false,
        // The fake servers close the connection when their script ends.
        end_with_launcher: false,
    }
}

fn connect(address: &str, timeout_ms: u64) -> Result<Bootstrap, BootstrapError> {
    let endpoint = ServerAddress::Port {
        address: address.to_owned(),
        id: None,
    };
    Bootstrap::connect(
        &endpoint,
        Some("0".into()),
        Some("2".into()),
        &options(timeout_ms),
    )
}

#[test]
fn garbage_reply_is_a_malformed_line_error() {
    let (address, server) = fake_server(vec![reply("init", "hello world\n")]);
    let error = connect(&address, 5000).expect_err("garbage must fail");
    let text = error.to_string();
    assert!(
        matches!(error, BootstrapError::Malformed { .. }),
        "{error:?}"
    );
    assert!(
        text.contains("malformed line from the PMI server while awaiting `response_to_init` in reply to `init`: \"hello world\""),
        "{text}"
    );
    server.join().expect("server");
}

#[test]
fn binary_garbage_is_a_malformed_line_error() {
    let (address, server) = fake_server(vec![Step::Reply("init", b"\xff\xfe\x00\x01\n".to_vec())]);
    let error = connect(&address, 5000).expect_err("garbage must fail");
    assert!(
        matches!(error, BootstrapError::Malformed { .. }),
        "{error:?}"
    );
    server.join().expect("server");
}

#[test]
fn endless_line_is_refused() {
    let endless = vec![b'x'; 200_000];
    let (address, server) = fake_server(vec![Step::Reply("init", endless)]);
    let error = connect(&address, 5000).expect_err("an endless line must fail");
    assert!(
        error
            .to_string()
            .contains("PMI I/O failed while awaiting `response_to_init` in reply to `init`"),
        "{error}"
    );
    server.join().expect("server");
}

#[test]
fn wrong_reply_is_an_unexpected_reply_error() {
    let (address, server) = fake_server(vec![reply("init", "cmd=barrier_out\n")]);
    let error = connect(&address, 5000).expect_err("wrong reply must fail");
    assert!(
        matches!(error, BootstrapError::Unexpected { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("\"cmd=barrier_out\""), "{error}");
    server.join().expect("server");
}

#[test]
fn refused_init_reports_the_code() {
    let (address, server) = fake_server(vec![reply(
        "init",
        "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=go_away\n",
    )]);
    let error = connect(&address, 5000).expect_err("refusal must fail");
    assert_eq!(
        error.to_string(),
        "the PMI server refused `init`: rc=-1 go_away"
    );
    server.join().expect("server");
}

#[test]
fn non_numeric_maxima_are_refused() {
    let mut steps = startup();
    steps[1] = reply(
        "get_maxes",
        "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=lots\n",
    );
    let (address, server) = fake_server(steps);
    let error = connect(&address, 5000).expect_err("bad maxima must fail");
    assert!(
        error.to_string().contains("a number in field `vallen_max`"),
        "{error}"
    );
    server.join().expect("server");
}

#[test]
fn closed_connection_names_what_was_awaited() {
    let (address, server) = fake_server(vec![Step::Close]);
    let error = connect(&address, 5000).expect_err("closed server must fail");
    assert!(matches!(error, BootstrapError::Closed { .. }), "{error:?}");
    assert!(error.to_string().contains("`response_to_init`"), "{error}");
    server.join().expect("server");
}

#[test]
fn silent_server_hits_the_deadline() {
    let (address, server) = fake_server(vec![Step::Silent("init")]);
    let error = connect(&address, 300).expect_err("silence must fail");
    assert!(
        matches!(error, BootstrapError::Deadline { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(
            "no answer from the PMI server within 300ms while awaiting `response_to_init`"
        ),
        "{error}"
    );
    server.join().expect("server");
}

#[test]
fn nobody_listening_is_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    drop(listener);
    let error = connect(&address, 1000).expect_err("nothing listens");
    assert!(matches!(error, BootstrapError::Connect { .. }), "{error:?}");
    assert!(error.to_string().contains(&format!("PMI_PORT={address}")));
}

#[test]
fn over_long_keys_and_values_are_refused_before_sending() {
    let mut steps = startup();
    steps.push(reply("finalize", "cmd=finalize_ack\n"));
    let (address, server) = fake_server(steps);
    let mut boot = connect(&address, 5000).expect("start-up");
    // Hydra's maxima count the C string's NUL: 63 bytes are the most that survive of a key.
    // A value may have what is left of a 1024-byte `put` line with the longest key:
    // 1024 - len("cmd=put kvsname=kvs_test key= value=\n") - 63 = 924.
    assert_eq!(boot.limits().value_max, 924);
    assert_eq!(boot.limits().key_max, 63);
    let error = boot.put("k", &"v".repeat(925)).expect_err("too long");
    assert_eq!(
        error.to_string(),
        "value for key `k` has 925 bytes, the PMI server allows at most 924 (use put_bytes for long data)"
    );
    let error = boot.put(&"k".repeat(64), "v").expect_err("too long");
    assert!(matches!(
        error,
        BootstrapError::KeyTooLong {
            len: 64,
            max: 63,
            ..
        }
    ));
    let error = boot.put("k", "two words").expect_err("space");
    assert!(matches!(error, BootstrapError::InvalidValue { .. }));
    let error = boot.put("a=b", "v").expect_err("equals");
    assert!(matches!(error, BootstrapError::InvalidKey { .. }));
    boot.finalize().expect("finalize");
    drop(boot);
    let seen = server.join().expect("server");
    assert!(
        !seen.iter().any(|line| line.starts_with("cmd=put")),
        "nothing invalid may reach the server: {seen:?}"
    );
}

#[test]
fn no_request_line_exceeds_1024_bytes_under_large_server_maxima() {
    // Slurm's maxima (keylen_max 256, vallen_max 1024) and a long kvsname: a value that fills
    // vallen_max would make a `put` line longer than the 1024 bytes Slurm reads at once.
    let kvsname = "k".repeat(100);
    let mut steps = vec![
        reply(
            "init",
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
        ),
        reply(
            "get_maxes",
            "cmd=maxes kvsname_max=256 keylen_max=256 vallen_max=1024\n",
        ),
        reply("get_appnum", "cmd=appnum appnum=0\n"),
        Step::Reply(
            "get_my_kvsname",
            format!("cmd=my_kvsname kvsname={kvsname}\n").into_bytes(),
        ),
        reply(
            "get",
            "cmd=get_result rc=-1 msg=key_not_found value=unknown\n",
        ),
    ];
    // One put of the longest line, then put_bytes: two pieces and their head.
    for _ in 0..4 {
        steps.push(reply("put", "cmd=put_result rc=0\n"));
    }
    steps.push(reply("finalize", "cmd=finalize_ack\n"));
    let (address, server) = fake_server(steps);
    let mut boot = connect(&address, 5000).expect("start-up");
    let limits = boot.limits();
    assert_eq!(limits.key_max, 63);
    let longest = format!(
        "cmd=put kvsname={kvsname} key={} value={}\n",
        "k".repeat(limits.key_max),
        "v".repeat(limits.value_max)
    );
    assert_eq!(longest.len(), 1024, "the limits leave no byte unused");
    boot.put(&"k".repeat(limits.key_max), &"v".repeat(limits.value_max))
        .expect("the longest put");
    // Twice a value's worth of hex digits go out in two pieces, each line within the limit.
    boot.put_bytes("card@0", &vec![0xab; limits.value_max & !1])
        .expect("put_bytes");
    boot.finalize().expect("finalize");
    drop(boot);
    let seen = server.join().expect("server");
    let puts: Vec<&String> = seen.iter().filter(|l| l.starts_with("cmd=put ")).collect();
    assert_eq!(puts.len(), 4, "{seen:?}");
    for line in &seen {
        assert!(line.len() < 1024, "{} bytes: {line}", line.len() + 1);
    }
}

#[test]
fn missing_key_and_failed_barrier_are_typed_errors() {
    let mut steps = startup();
    steps.push(reply(
        "get",
        "cmd=get_result rc=-1 msg=key_x_not_found value=unknown\n",
    ));
    steps.push(reply(
        "barrier_in",
        "cmd=barrier_out rc=-1 msg=rank_1_left_the_job_without_finalize\n",
    ));
    let (address, server) = fake_server(steps);
    let mut boot = connect(&address, 5000).expect("start-up");
    let error = boot.get("x").expect_err("missing");
    assert!(
        matches!(error, BootstrapError::KeyNotFound { .. }),
        "{error:?}"
    );
    let error = boot.fence().expect_err("broken barrier");
    assert_eq!(
        error.to_string(),
        "the PMI barrier failed: rc=-1 rank_1_left_the_job_without_finalize"
    );
    drop(boot);
    server.join().expect("server");
}

#[test]
fn corrupt_put_bytes_data_is_detected() {
    let mut steps = startup();
    steps.push(reply("get", "cmd=get_result rc=0 msg=success value=hzz\n"));
    steps.push(reply("get", "cmd=get_result rc=0 msg=success value=c2.5\n"));
    steps.push(reply("get", "cmd=get_result rc=0 msg=success value=0102\n"));
    steps.push(reply("get", "cmd=get_result rc=0 msg=success value=03\n"));
    // A header claiming an impossible length: an error, not an allocation failure.
    steps.push(reply(
        "get",
        "cmd=get_result rc=0 msg=success value=c1.18446744073709551615\n",
    ));
    steps.push(reply("get", "cmd=get_result rc=0 msg=success value=0102\n"));
    let (address, server) = fake_server(steps);
    let mut boot = connect(&address, 5000).expect("start-up");
    let error = boot.get_bytes("a").expect_err("not hex");
    assert!(
        matches!(error, BootstrapError::CorruptBytes { .. }),
        "{error:?}"
    );
    let error = boot.get_bytes("b").expect_err("short");
    assert!(
        error
            .to_string()
            .contains("pieces hold 3 bytes, the header says 5"),
        "{error}"
    );
    let error = boot.get_bytes("c").expect_err("huge length");
    assert!(
        matches!(error, BootstrapError::CorruptBytes { .. }),
        "{error:?}"
    );
    drop(boot);
    server.join().expect("server");
}

#[test]
fn port_mode_takes_rank_and_size_from_the_server() {
    let mut steps = vec![reply(
        "initack",
        "cmd=initack\ncmd=set size=3\ncmd=set rank=2\ncmd=set debug=0\n",
    )];
    steps.extend(startup());
    steps.push(reply("finalize", "cmd=finalize_ack\n"));
    let (address, server) = fake_server(steps);
    let endpoint = ServerAddress::Port {
        address,
        id: Some("7".into()),
    };
    let mut boot =
        Bootstrap::connect(&endpoint, None, None, &options(5000)).expect("port mode start-up");
    assert_eq!((boot.rank(), boot.size()), (2, 3));
    assert_eq!(boot.kvsname(), "kvs_test");
    boot.finalize().expect("finalize");
    drop(boot);
    let seen = server.join().expect("server");
    assert_eq!(seen[0], "cmd=initack pmiid=7");
    assert_eq!(seen[1], "cmd=init pmi_version=1 pmi_subversion=1");
    assert_eq!(seen.last().map(String::as_str), Some("cmd=finalize"));
}

#[test]
fn rank_outside_the_job_size_is_refused() {
    let (address, server) = fake_server(startup());
    let endpoint = ServerAddress::Port { address, id: None };
    let error = Bootstrap::connect(
        &endpoint,
        Some("4".into()),
        Some("4".into()),
        &options(5000),
    )
    .expect_err("rank 4 of 4");
    assert!(
        error
            .to_string()
            .contains("rank must be below the job size 4"),
        "{error}"
    );
    server.join().expect("server");
}

/// The binary, given an inherited PMI_FD whose server speaks garbage, says so and fails.
#[test]
fn pmi_check_over_an_inherited_fd_reports_garbage() {
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    rustix::io::fcntl_setfd(&theirs, rustix::io::FdFlags::empty()).expect("clear CLOEXEC");
    let mut command = circulant(&["pmi-check", "--timeout", "10"]);
    command
        .env("PMI_FD", theirs.as_raw_fd().to_string())
        .env("PMI_RANK", "0")
        .env("PMI_SIZE", "1")
        .env_remove("PMI_PORT");
    let server = thread::spawn(move || {
        serve(
            ours,
            vec![reply("init", "cmd=response_to_init rc=0 rc=1\n")],
        )
    });
    let job = common::Started::new(command);
    drop(theirs);
    let done = job.finish(common::LIMIT);
    assert_eq!(done.code(), Some(1), "{done:?}");
    assert!(
        done.stderr.contains("malformed line from the PMI server while awaiting `response_to_init` in reply to `init`: \"cmd=response_to_init rc=0 rc=1\""),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains("field `rc` appears twice"),
        "{}",
        done.stderr
    );
    server.join().expect("server");
}

#[test]
fn pmi_fd_that_is_not_open_or_not_a_socket_is_reported() {
    let mut command = circulant(&["pmi-check"]);
    command
        .env("PMI_FD", "987")
        .env("PMI_RANK", "0")
        .env("PMI_SIZE", "1");
    let done = run(command);
    assert_eq!(done.code(), Some(1));
    assert!(
        done.stderr
            .contains("cannot reach the PMI server at PMI_FD=987"),
        "{}",
        done.stderr
    );
    // Standard input is /dev/null in these tests: open, but no socket.
    let mut command = circulant(&["pmi-check"]);
    command
        .env("PMI_FD", "0")
        .env("PMI_RANK", "0")
        .env("PMI_SIZE", "1");
    let done = run(command);
    assert_eq!(done.code(), Some(1));
    assert!(
        done.stderr.contains("descriptor is not a socket"),
        "{}",
        done.stderr
    );
}

#[test]
fn rank_without_a_channel_is_reported() {
    let mut command = circulant(&["pmi-check"]);
    command
        .env_remove("PMI_FD")
        .env_remove("PMI_PORT")
        .env("PMI_RANK", "0")
        .env("PMI_SIZE", "2");
    let done = run(command);
    assert_eq!(done.code(), Some(1));
    assert!(
        done.stderr.contains("neither PMI_FD nor PMI_PORT"),
        "{}",
        done.stderr
    );
}

#[test]
fn without_singleton_outside_a_job_is_not_in_job() {
    let options = BootstrapOptions {
        allow_singleton: false,
        ..BootstrapOptions::default()
    };
    // Only meaningful when the test itself does not run inside a PMI job.
    if std::env::var_os("PMI_FD").is_none() && std::env::var_os("PMI_PORT").is_none() {
        let error = Bootstrap::from_env_with(&options).expect_err("no job");
        assert_eq!(
            error.to_string(),
            "not inside a job: PMI_RANK/PMI_FD not set; start with `circulant run -n N -- ...` or mpiexec"
        );
    }
}

#[test]
fn built_in_launcher_refuses_request_lines_over_1024_bytes() {
    // A `put` line of 1025 bytes, as a client that ignores the limit would send: the built-in
    // launcher is as strict as Slurm, so that jobs tested under it run under Slurm too.
    let value = "v".repeat(1025 - "cmd=put kvsname=x key=k value=\n".len());
    let script = format!("printf 'cmd=put kvsname=x key=k value={value}\\n' >&$PMI_FD; sleep 20");
    let done = run(circulant(&["run", "-n", "1", "--", "bash", "-c", &script]));
    assert_eq!(done.code(), Some(1), "{done:?}");
    assert!(
        done.stderr.contains(
            "rank 0 broke the PMI protocol: PMI request line of 1025 bytes, over the 1024 a server reads"
        ),
        "{}",
        done.stderr
    );
}

#[test]
fn pmi2_asked_of_a_pmi1_server_is_an_error() {
    let done = run(circulant(&[
        "run",
        "-n",
        "1",
        "--",
        "env",
        "CIRCULANT_PMI=pmi2",
        bin(),
        "pmi-check",
    ]));
    assert_eq!(done.code(), Some(1), "{done:?}");
    assert!(
        done.stderr.contains(
            "CIRCULANT_PMI asks for pmi-2, but this process has no PMI it can use: the PMI server \
             answered `init` with PMI-1 only (unset it)"
        ),
        "{}",
        done.stderr
    );
}

/// A PMI-2 server that accepts `init pmi_version=2`, reads the `fullinit` frame and answers
/// it with `answer`.
fn fake_pmi2_server(answer: &'static [u8]) -> (String, thread::JoinHandle<String>) {
    use std::io::Read;
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let address = listener.local_addr().expect("address").to_string();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        let mut reader = BufReader::new(stream);
        let mut init = String::new();
        reader.read_line(&mut init).expect("init line");
        reader
            .get_mut()
            .write_all(b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n")
            .expect("reply");
        let mut length = [0u8; 6];
        reader.read_exact(&mut length).expect("length field");
        let len: usize = std::str::from_utf8(&length)
            .expect("ascii")
            .trim()
            .parse()
            .expect("number");
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).expect("body");
        let _ = reader.get_mut().write_all(answer);
        // Keep the connection until the client gives up.
        let mut rest = Vec::new();
        let _ = reader.read_to_end(&mut rest);
        format!("{init}{}", String::from_utf8_lossy(&body))
    });
    (address, handle)
}

fn pmi2_check(address: &str) -> common::Finished {
    let mut command = circulant(&["pmi-check"]);
    command
        .env("PMI_PORT", address)
        .env("PMI_RANK", "0")
        .env("PMI_SIZE", "1")
        .env("PMI_JOBID", "job7")
        .env("CIRCULANT_PMI", "pmi2")
        .env("CIRCULANT_BOOTSTRAP_TIMEOUT", "2");
    run(command)
}

#[test]
fn pmi2_client_sends_fullinit_and_reports_a_garbage_length_field() {
    let (address, server) = fake_pmi2_server(b"garbage");
    let done = pmi2_check(&address);
    assert_eq!(done.code(), Some(1), "{done:?}");
    assert!(
        done.stderr.contains(
            "unexpected reply from the PMI server while awaiting the length field of \
             `fullinit-response`: \"garbag\""
        ),
        "{}",
        done.stderr
    );
    let seen = server.join().expect("server");
    assert!(
        seen.starts_with("cmd=init pmi_version=2 pmi_subversion=0\n")
            && seen.ends_with("cmd=fullinit;threaded=FALSE;pmijobid=job7;pmirank=0;"),
        "{seen:?}"
    );
}

#[test]
fn pmi2_client_reports_a_refused_fullinit_and_a_silent_server() {
    let (address, server) = fake_pmi2_server(b"43    cmd=fullinit-response;rc=3;errmsg=no;;such;");
    let done = pmi2_check(&address);
    assert_eq!(done.code(), Some(1), "{done:?}");
    assert!(
        done.stderr
            .contains("the PMI server refused `fullinit`: rc=3 no;such"),
        "{}",
        done.stderr
    );
    server.join().expect("server");
    let (address, server) = fake_pmi2_server(b"");
    let done = pmi2_check(&address);
    assert_eq!(done.code(), Some(1), "{done:?}");
    assert!(
        done.stderr
            .contains("no answer from the PMI server within 2s while awaiting `fullinit-response`"),
        "{}",
        done.stderr
    );
    server.join().expect("server");
}

/// A server's `PMI_process_mapping` gives the job's node count; a server without one leaves
/// it unknown, and neither is an error.
#[test]
fn the_process_mapping_gives_the_node_count() {
    for (answer, nodes) in [
        (
            "cmd=get_result rc=0 msg=success value=(vector,(0,3,1))\n",
            Some(3),
        ),
        (
            "cmd=get_result rc=0 msg=success value=(vector,(0,1,4))\n",
            Some(1),
        ),
        ("cmd=get_result rc=0 msg=success value=garbage\n", None),
        (
            "cmd=get_result rc=-1 msg=key_not_found value=unknown\n",
            None,
        ),
    ] {
        let mut steps = startup();
        steps.pop();
        steps.push(reply("get", answer));
        steps.push(reply("finalize", "cmd=finalize_ack\n"));
        let (address, server) = fake_server(steps);
        let mut boot = connect(&address, 5000).expect("start-up");
        assert_eq!(boot.nodes(), nodes, "{answer}");
        boot.finalize().expect("finalize");
        drop(boot);
        let seen = server.join().expect("server");
        assert!(
            seen.iter()
                .any(|l| l == "cmd=get kvsname=kvs_test key=PMI_process_mapping"),
            "{seen:?}"
        );
    }
}

/// A start-up whose server keeps `mapping` as its `PMI_process_mapping`.
fn startup_with_mapping(mapping: &str) -> Vec<Step> {
    let mut steps = startup();
    steps.pop();
    steps.push(Step::Reply(
        "get",
        format!("cmd=get_result rc=0 msg=success value={mapping}\n").into_bytes(),
    ));
    steps
}

/// Rank 1 of 5 at the fake server `address`.
fn connect_rank_1_of_5(address: &str) -> Bootstrap {
    let endpoint = ServerAddress::Port {
        address: address.to_owned(),
        id: None,
    };
    Bootstrap::connect(
        &endpoint,
        Some("1".into()),
        Some("5".into()),
        &options(5000),
    )
    .expect("start-up")
}

#[test]
fn the_servers_mapping_gives_the_node_of_every_rank_without_an_exchange() {
    for (mapping, want) in [
        // Round robin over three nodes.
        ("(vector,(0,3,1))", [0, 1, 2, 0, 1]),
        // Uneven blocks: 2 + 2 + 1.
        ("(vector,(0,2,2),(2,1,1))", [0, 0, 1, 1, 2]),
        // Every rank on one node, as circulant run and Hydra on one host say.
        ("(vector,(0,1,5))", [0; 5]),
    ] {
        let (address, server) = fake_server(startup_with_mapping(mapping));
        let mut boot = connect_rank_1_of_5(&address);
        let map = boot.node_map(NodeSource::Launcher).expect("node map");
        assert_eq!(map.node_of_each(), want, "{mapping}");
        assert_eq!(map.node(), want[1], "{mapping}");
        assert_eq!(boot.nodes(), Some(map.nodes()), "{mapping}");
        drop(boot);
        // Nothing after the mapping's get: no host exchange.
        let seen = server.join().expect("server");
        assert!(
            seen.last()
                .is_some_and(|l| l.contains("key=PMI_process_mapping")),
            "{seen:?}"
        );
    }
}

#[test]
fn without_a_mapping_the_ranks_exchange_their_host_names() {
    let mut steps = startup();
    steps.push(reply("put", "cmd=put_result rc=0 msg=success\n"));
    steps.push(reply("barrier_in", "cmd=barrier_out rc=0\n"));
    // Hosts "n1" and "n2" as put_bytes writes them, then "n1" again: rank 2 shares rank 0's.
    for host in ["h6e31", "h6e32", "h6e31"] {
        steps.push(Step::Reply(
            "get",
            format!("cmd=get_result rc=0 msg=success value={host}\n").into_bytes(),
        ));
    }
    let (address, server) = fake_server(steps);
    let endpoint = ServerAddress::Port { address, id: None };
    let mut boot = Bootstrap::connect(
        &endpoint,
        Some("1".into()),
        Some("3".into()),
        &options(5000),
    )
    .expect("start-up");
    assert_eq!(boot.launcher_node_map(), None);
    let map = boot.node_map(NodeSource::Launcher).expect("node map");
    assert_eq!(map.node_of_each(), [0, 1, 0]);
    assert_eq!((map.node(), map.local_ranks()), (1, &[1][..]));
    drop(boot);
    let seen = server.join().expect("server");
    assert!(
        seen.iter()
            .any(|l| l.starts_with("cmd=put") && l.contains("key=host@1")),
        "{seen:?}"
    );
    assert!(seen.iter().any(|l| l.contains("key=host@2")), "{seen:?}");
}
