//! A PMI-2 client on the channel where the server accepted `init pmi_version=2`.
//!
//! Each message is a 6-character decimal length, padded with spaces, followed by that many
//! bytes of `key=value;` pairs, the first being `cmd=NAME;`. A `;` inside a value is written
//! `;;`. Replies are named after the request with `-response` appended and carry `rc`.

use std::time::Instant;

use super::channel::Channel;
use super::mapping;
use super::wire::excerpt;
use super::{check_entry, slurm_step_nodes, BootstrapError, KeyValue, KvsLimits};

/// Width of the length field before every message.
const LENGTH_DIGITS: usize = 6;

/// PMI-2's maxima (`PMI2_MAX_KEYLEN` 64 and `PMI2_MAX_VALLEN` 1024, each with a C string's
/// terminating NUL).
const LIMITS: KvsLimits = KvsLimits {
    kvsname_max: 255,
    key_max: 63,
    value_max: 1023,
};

/// One PMI-2 message: its fields in order, `cmd` first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    fields: Vec<(String, String)>,
}

impl Frame {
    /// A message with `cmd` as its first field.
    pub fn new(cmd: &str) -> Self {
        Frame {
            fields: vec![("cmd".to_owned(), cmd.to_owned())],
        }
    }

    /// The message with one more field.
    pub fn with(mut self, key: &str, value: impl ToString) -> Self {
        self.fields.push((key.to_owned(), value.to_string()));
        self
    }

    /// The command (the `cmd` field), empty if absent.
    pub fn cmd(&self) -> &str {
        self.get("cmd").unwrap_or("")
    }

    /// The value of the first field named `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The message with its length field.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = String::new();
        for (key, value) in &self.fields {
            body.push_str(key);
            body.push('=');
            body.push_str(&value.replace(';', ";;"));
            body.push(';');
        }
        let mut bytes = format!("{:<width$}", body.len(), width = LENGTH_DIGITS).into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        bytes
    }

    /// Parses a message body (without its length field).
    pub fn parse(body: &[u8]) -> Result<Frame, String> {
        let text = std::str::from_utf8(body).map_err(|_| "not UTF-8".to_owned())?;
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c != ';' {
                field.push(c);
            } else if chars.peek() == Some(&';') {
                chars.next();
                field.push(';');
            } else {
                let (key, value) = field.split_once('=').ok_or_else(|| {
                    format!("field `{}` is not key=value", excerpt(field.as_bytes()))
                })?;
                fields.push((key.to_owned(), value.to_owned()));
                field.clear();
            }
        }
        if !field.is_empty() {
            return Err("the last field has no closing `;`".into());
        }
        match fields.first() {
            Some((key, name)) if key == "cmd" && !name.is_empty() => Ok(Frame { fields }),
            _ => Err("the message does not start with `cmd=`".into()),
        }
    }
}

/// An initialized PMI-2 session.
pub struct Pmi2Client {
    channel: Channel,
    jobid: String,
    rank: usize,
    size: usize,
    appnum: i64,
    /// The server's `PMI_process_mapping`, once read, if it is one the parser understands.
    mapping: Option<String>,
}

impl Pmi2Client {
    /// `fullinit` for `rank` of job `jobid` (the launcher's `PMI_RANK` and `PMI_JOBID`, which
    /// Slurm requires), then `job-getid`.
    pub(super) fn fullinit(
        channel: Channel,
        rank: Option<usize>,
        jobid: Option<String>,
    ) -> Result<Self, BootstrapError> {
        let mut client = Pmi2Client {
            channel,
            jobid: String::new(),
            rank: 0,
            size: 0,
            appnum: 0,
            mapping: None,
        };
        let mut request = Frame::new("fullinit").with("threaded", "FALSE");
        if let Some(jobid) = jobid {
            request = request.with("pmijobid", jobid);
        }
        if let Some(rank) = rank {
            request = request.with("pmirank", rank);
        }
        let reply = client.call(&request)?;
        client.rank = number(&reply, "rank")?;
        client.size = number(&reply, "size")?;
        client.appnum = reply
            .get("appnum")
            .map_or(Ok(0), |_| number(&reply, "appnum"))?;
        let job = client.call(&Frame::new("job-getid"))?;
        client.jobid = field(&job, "jobid")?.to_owned();
        Ok(client)
    }

    /// This process's rank, as the server assigned it.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks in the job.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Reads the job attribute `PMI_process_mapping` (`info-getjobattr`); a server without
    /// it is no error.
    pub(super) fn read_mapping(&mut self) -> Result<(), BootstrapError> {
        let request = Frame::new("info-getjobattr").with("key", mapping::KEY);
        let reply = self.exchange(&request)?;
        self.mapping = match (reply.get("rc"), reply.get("found")) {
            (Some("0") | None, Some("TRUE")) => {
                let value = field(&reply, "value")?;
                mapping::nodes(value).map(|_| value.to_owned())
            }
            _ => None,
        };
        Ok(())
    }

    /// Ends this process if the server hangs up before finalize.
    pub(super) fn watch_hangup(&mut self) -> Result<(), BootstrapError> {
        self.channel.watch_hangup()
    }

    /// Sends `request`, awaits its response, and fails on a non-zero `rc`.
    fn call(&mut self, request: &Frame) -> Result<Frame, BootstrapError> {
        let reply = self.exchange(request)?;
        match reply.get("rc") {
            Some("0") | None => Ok(reply),
            Some(rc) => Err(BootstrapError::Refused {
                request: request.cmd().to_owned(),
                rc: rc.to_owned(),
                detail: reply.get("errmsg").unwrap_or("").to_owned(),
            }),
        }
    }

    /// Sends `request` and awaits its `-response`, without judging its `rc`.
    fn exchange(&mut self, request: &Frame) -> Result<Frame, BootstrapError> {
        let deadline = Instant::now() + self.channel.timeout();
        self.channel.send(&request.encode(), request.cmd())?;
        let expect = format!("{}-response", request.cmd());
        let awaiting = format!("`{expect}`");
        let head = self
            .channel
            .receive_exact(LENGTH_DIGITS, &awaiting, deadline)?;
        let len: usize = std::str::from_utf8(&head)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| BootstrapError::Unexpected {
                awaiting: format!("the length field of {awaiting}"),
                got: excerpt(&head),
            })?;
        let body = self.channel.receive_exact(len, &awaiting, deadline)?;
        let reply = Frame::parse(&body).map_err(|problem| BootstrapError::Unexpected {
            awaiting: awaiting.clone(),
            got: format!("{problem}: {}", excerpt(&body)),
        })?;
        if reply.cmd() != expect {
            return Err(BootstrapError::Unexpected {
                awaiting,
                got: excerpt(&body),
            });
        }
        Ok(reply)
    }
}

impl KeyValue for Pmi2Client {
    fn kind(&self) -> &'static str {
        "pmi-2"
    }

    /// The job id the server reported; key-value requests name it.
    fn kvsname(&self) -> &str {
        &self.jobid
    }

    /// The application number (`appnum`) of this process's executable.
    fn appnum(&self) -> i64 {
        self.appnum
    }

    /// A Slurm step's node count, else the server's `PMI_process_mapping`, if it had one.
    fn nodes(&self) -> Option<usize> {
        slurm_step_nodes().or_else(|| self.mapping.as_deref().and_then(mapping::nodes))
    }

    /// The node of every rank in the server's `PMI_process_mapping`, if it had one.
    fn node_ids(&self, size: usize) -> Option<Vec<usize>> {
        mapping::node_of_ranks(self.mapping.as_deref()?, size)
    }

    /// PMI-2's fixed maxima.
    fn limits(&self) -> KvsLimits {
        LIMITS
    }

    /// Bounds each later wait for a reply by `timeout`.
    fn set_timeout(&mut self, timeout: std::time::Duration) -> Result<(), BootstrapError> {
        self.channel.set_timeout(timeout)
    }

    /// Slurm's step daemons receive the whole space at the fence; elsewhere (Hydra) every get
    /// asks the launcher's server.
    fn gets_are_local(&self) -> bool {
        slurm_step_nodes().is_some()
    }

    /// `kvs-put`; visible to others after the next fence.
    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        check_entry(key, value, LIMITS)?;
        self.call(&Frame::new("kvs-put").with("key", key).with("value", value))?;
        Ok(())
    }

    /// `kvs-get` of the value stored under `key` before the last fence.
    fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        check_entry(key, "", LIMITS)?;
        let request = Frame::new("kvs-get")
            .with("jobid", &self.jobid)
            .with("srcid", -1)
            .with("key", key);
        let reply = self.exchange(&request)?;
        if reply.get("rc") != Some("0") || reply.get("found") != Some("TRUE") {
            return Err(BootstrapError::KeyNotFound {
                key: key.to_owned(),
                detail: reply.get("errmsg").unwrap_or("").to_owned(),
            });
        }
        Ok(field(&reply, "value")?.to_owned())
    }

    /// `kvs-fence`: every rank's puts are visible to every rank afterwards.
    fn fence(&mut self) -> Result<(), BootstrapError> {
        let reply = self.exchange(&Frame::new("kvs-fence"))?;
        if let Some(rc) = reply.get("rc").filter(|rc| *rc != "0") {
            return Err(BootstrapError::BarrierFailed {
                detail: format!("rc={rc} {}", reply.get("errmsg").unwrap_or("")),
            });
        }
        Ok(())
    }

    /// `abort` of the whole job (`isworld`) with `message`; PMI-2's abort carries no code. No
    /// reply is awaited.
    fn abort(&mut self, _code: i32, message: &str) -> Result<(), BootstrapError> {
        let request = Frame::new("abort")
            .with("isworld", "TRUE")
            .with("msg", message);
        self.channel.send(&request.encode(), "abort")
    }

    /// Ends the hang-up watch, then `finalize`: the server then no longer counts this rank in
    /// barriers.
    fn finalize(&mut self) -> Result<(), BootstrapError> {
        self.channel.end_watch();
        self.call(&Frame::new("finalize"))?;
        Ok(())
    }
}

/// Field `key` of `frame`.
fn field<'f>(frame: &'f Frame, key: &str) -> Result<&'f str, BootstrapError> {
    frame.get(key).ok_or_else(|| BootstrapError::Unexpected {
        awaiting: format!("field `{key}` in `{}`", frame.cmd()),
        got: excerpt(&frame.encode()[LENGTH_DIGITS..]),
    })
}

/// Field `key` of `frame` as a number.
fn number<T: std::str::FromStr>(frame: &Frame, key: &str) -> Result<T, BootstrapError> {
    let text = field(frame, key)?;
    text.parse().map_err(|_| BootstrapError::Unexpected {
        awaiting: format!("a number in field `{key}` of `{}`", frame.cmd()),
        got: excerpt(text.as_bytes()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_with_escaped_semicolons() {
        let frame = Frame::new("kvs-put")
            .with("key", "k")
            .with("value", "a;b;;c");
        let bytes = frame.encode();
        assert_eq!(
            &bytes[..LENGTH_DIGITS],
            format!("{:<6}", bytes.len() - 6).as_bytes()
        );
        assert_eq!(
            std::str::from_utf8(&bytes[LENGTH_DIGITS..]).expect("utf-8"),
            "cmd=kvs-put;key=k;value=a;;b;;;;c;"
        );
        assert_eq!(Frame::parse(&bytes[LENGTH_DIGITS..]), Ok(frame));
    }

    #[test]
    fn parses_a_fullinit_response_and_rejects_garbage() {
        let reply = Frame::parse(
            b"cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=3;size=4;appnum=0;",
        )
        .expect("valid");
        assert_eq!(reply.cmd(), "fullinit-response");
        assert_eq!(number::<usize>(&reply, "size").expect("size"), 4);
        assert!(Frame::parse(b"cmd=x;novalue;").is_err());
        assert!(Frame::parse(b"cmd=x;a=1").is_err());
        assert!(Frame::parse(b"a=1;cmd=x;").is_err());
        assert!(Frame::parse(b"cmd=\xff;").is_err());
    }
}
