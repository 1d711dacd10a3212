//! A PMI-1 client over the wire protocol: the connection named by `PMI_FD` (a socket the
//! launcher left open for us) or `PMI_PORT` (`host:port`, with `PMI_ID` in Hydra's port mode).
//! Every reply is awaited with a deadline, and every failure says what was awaited.

use std::time::Instant;

use super::channel::{Channel, ServerAddress};
use super::mapping;
use super::wire::{check_token, excerpt, Message, REQUEST_LINE_MAX};
use super::{slurm_step_nodes, BootstrapError, KeyValue, KvsLimits};

/// Keys this client uses are short; a longer server maximum would only take room from values
/// within [`REQUEST_LINE_MAX`].
const KEY_MAX: usize = 63;

/// An initialized PMI-1 session.
pub struct Pmi1Client {
    channel: Channel,
    kvsname: String,
    limits: KvsLimits,
    appnum: i64,
    rank: Option<usize>,
    size: Option<usize>,
    /// The server's `PMI_process_mapping`, once read, if it is one the parser understands.
    mapping: Option<String>,
}

/// The server's answer to `init`: it stays with PMI-1, or accepts PMI-2 on the same channel.
pub(super) enum Greeted {
    /// The server speaks PMI-1; start-up is complete.
    Pmi1(Pmi1Client),
    /// The server accepted PMI-2: `fullinit` follows on this channel.
    Pmi2 {
        /// The channel to the server.
        channel: Channel,
        /// Rank and size told in port mode.
        assigned: (Option<usize>, Option<usize>),
    },
}

impl Pmi1Client {
    /// Connects and runs the PMI-1 start-up: `init`, `get_maxes`, `get_appnum`,
    /// `get_my_kvsname`; in port mode with an id, the server also tells rank and size.
    /// `init` offers PMI-2 if `offer_pmi2`: a server that speaks it
    /// answers `pmi_version=2`, one that does not answers 1 (or refuses, and is asked again
    /// for version 1).
    pub(super) fn greet(
        server: &ServerAddress,
        timeout: std::time::Duration,
        offer_pmi2: bool,
    ) -> Result<Greeted, BootstrapError> {
        let mut client = Pmi1Client {
            channel: Channel::open(server, timeout)?,
            kvsname: String::new(),
            limits: KvsLimits {
                kvsname_max: 0,
                key_max: 0,
                value_max: 0,
            },
            appnum: 0,
            rank: None,
            size: None,
            mapping: None,
        };
        if let ServerAddress::Port { id: Some(id), .. } = server {
            client.port_handshake(id)?;
        }
        let init = |version: u32| {
            Message::new("init")
                .with("pmi_version", version)
                .with("pmi_subversion", if version == 2 { 0 } else { 1 })
        };
        let mut reply = None;
        if offer_pmi2 {
            let answer = client.exchange(&init(2), "response_to_init")?;
            if answer.get("rc").map_or(true, |rc| rc == "0") {
                reply = Some(answer);
            }
        }
        let reply = match reply {
            Some(reply) => reply,
            None => client.call(&init(1), "response_to_init")?,
        };
        match reply.get("pmi_version") {
            Some("2") if offer_pmi2 => {
                return Ok(Greeted::Pmi2 {
                    assigned: (client.rank, client.size),
                    channel: client.channel,
                })
            }
            Some("1") | None => {}
            Some(version) => {
                return Err(BootstrapError::Unexpected {
                    awaiting: "the reply to `init`".into(),
                    got: format!("server speaks PMI version {version}, not 1"),
                })
            }
        }
        let maxes = client.call(&Message::new("get_maxes"), "maxes")?;
        let appnum = client.call(&Message::new("get_appnum"), "appnum")?;
        client.appnum = number_field(&appnum, "appnum")?;
        let name = client.call(&Message::new("get_my_kvsname"), "my_kvsname")?;
        client.kvsname = text_field(&name, "kvsname")?.to_owned();
        let usable = |announced: usize| announced.saturating_sub(1);
        let key_max = usable(number_field(&maxes, "keylen_max")?).min(KEY_MAX);
        // The longest `put` line must fit in one request line.
        let put_overhead = Message::new("put")
            .with("kvsname", &client.kvsname)
            .with("key", "")
            .with("value", "")
            .encode()
            .len();
        let line_room = REQUEST_LINE_MAX.saturating_sub(put_overhead + key_max);
        client.limits = KvsLimits {
            kvsname_max: usable(number_field(&maxes, "kvsname_max")?),
            key_max,
            value_max: usable(number_field(&maxes, "vallen_max")?).min(line_room),
        };
        if client.limits.key_max == 0 || client.limits.value_max < 2 {
            return Err(BootstrapError::Unexpected {
                awaiting: "usable maxima in the reply to `get_maxes`".into(),
                got: excerpt(maxes.encode().trim_end().as_bytes()),
            });
        }
        Ok(Greeted::Pmi1(client))
    }

    /// Hydra's port mode: `initack pmiid=ID`, answered by `initack` and `set` lines.
    fn port_handshake(&mut self, id: &str) -> Result<(), BootstrapError> {
        self.call(&Message::new("initack").with("pmiid", id), "initack")?;
        for _ in 0..3 {
            let set = self.receive(
                "the `set` lines after `initack`",
                Instant::now() + self.channel.timeout(),
            )?;
            if set.cmd() != "set" {
                return Err(BootstrapError::Unexpected {
                    awaiting: "the `set` lines after `initack`".into(),
                    got: set.encode(),
                });
            }
            if set.get("size").is_some() {
                self.size = Some(number_field(&set, "size")?);
            } else if set.get("rank").is_some() {
                self.rank = Some(number_field(&set, "rank")?);
            }
        }
        Ok(())
    }

    /// Reads the server's `PMI_process_mapping` (Hydra and `circulant run` keep one; a
    /// server without it is no error).
    pub(super) fn read_mapping(&mut self) -> Result<(), BootstrapError> {
        self.mapping = match self.get(mapping::KEY) {
            Ok(value) => mapping::nodes(&value).map(|_| value),
            Err(BootstrapError::KeyNotFound { .. }) => None,
            Err(other) => return Err(other),
        };
        Ok(())
    }
    /// Rank and size told by the server in port mode.
    pub(super) fn assigned(&self) -> (Option<usize>, Option<usize>) {
        (self.rank, self.size)
    }

    /// Ends this process if the server hangs up before finalize.
    pub(super) fn watch_hangup(&mut self) -> Result<(), BootstrapError> {
        self.channel.watch_hangup()
    }

    /// Fails unless `key` is a PMI-1 token within the server's key limit.
    fn check_key(&self, key: &str) -> Result<(), BootstrapError> {
        if let Err(problem) = check_token(key, true) {
            return Err(BootstrapError::InvalidKey {
                key: key.to_owned(),
                problem: problem.to_string(),
            });
        }
        if key.len() > self.limits.key_max {
            return Err(BootstrapError::KeyTooLong {
                key: key.to_owned(),
                len: key.len(),
                max: self.limits.key_max,
            });
        }
        Ok(())
    }

    /// Sends `request`, awaits `expect`, and fails on a non-zero `rc`.
    fn call(&mut self, request: &Message, expect: &str) -> Result<Message, BootstrapError> {
        let reply = self.exchange(request, expect)?;
        if let Some(rc) = reply.get("rc").filter(|rc| *rc != "0") {
            return Err(BootstrapError::Refused {
                request: request.cmd().to_owned(),
                rc: rc.to_owned(),
                detail: reply.get("msg").unwrap_or("").to_owned(),
            });
        }
        Ok(reply)
    }

    /// Sends `request` and awaits the reply named `expect`, without judging its `rc`.
    fn exchange(&mut self, request: &Message, expect: &str) -> Result<Message, BootstrapError> {
        let deadline = Instant::now() + self.channel.timeout();
        self.send(request)?;
        let awaiting = format!("`{expect}` in reply to `{}`", request.cmd());
        let reply = self.receive(&awaiting, deadline)?;
        if reply.cmd() != expect {
            return Err(BootstrapError::Unexpected {
                awaiting,
                got: excerpt(reply.encode().trim_end().as_bytes()),
            });
        }
        Ok(reply)
    }

    /// Sends one request line.
    fn send(&mut self, request: &Message) -> Result<(), BootstrapError> {
        self.channel
            .send(request.encode().as_bytes(), request.cmd())
    }

    /// Reads the next line from the server by `deadline`; `awaiting` names it in errors.
    fn receive(&mut self, awaiting: &str, deadline: Instant) -> Result<Message, BootstrapError> {
        let line = self.channel.receive_line(awaiting, deadline)?;
        Message::parse(&line).map_err(|source| BootstrapError::Malformed {
            awaiting: awaiting.to_owned(),
            line: excerpt(&line),
            source,
        })
    }
}

impl KeyValue for Pmi1Client {
    fn kind(&self) -> &'static str {
        "pmi-1"
    }

    /// The name `get_my_kvsname` returned.
    fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// The number `get_appnum` returned.
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

    /// The server's `get_maxes`, less the terminating NUL and within one request line.
    fn limits(&self) -> KvsLimits {
        self.limits
    }

    /// Bounds each later wait for a reply by `timeout`.
    fn set_timeout(&mut self, timeout: std::time::Duration) -> Result<(), BootstrapError> {
        self.channel.set_timeout(timeout)
    }

    /// Only a Slurm step daemon holds the whole space on every node; elsewhere (Hydra,
    /// `circulant run`) every get asks the launcher's one server.
    fn gets_are_local(&self) -> bool {
        slurm_step_nodes().is_some()
    }

    /// `put`, checked against PMI-1's token rules and the server's limits first.
    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        self.check_key(key)?;
        if let Err(problem) = check_token(value, false) {
            return Err(BootstrapError::InvalidValue {
                key: key.to_owned(),
                problem: problem.to_string(),
            });
        }
        if value.len() > self.limits.value_max {
            return Err(BootstrapError::ValueTooLong {
                key: key.to_owned(),
                len: value.len(),
                max: self.limits.value_max,
            });
        }
        let request = Message::new("put")
            .with("kvsname", &self.kvsname)
            .with("key", key)
            .with("value", value);
        self.call(&request, "put_result")?;
        Ok(())
    }

    /// The value of `key`, or `KeyNotFound` if the server has none.
    fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        self.check_key(key)?;
        let request = Message::new("get")
            .with("kvsname", &self.kvsname)
            .with("key", key);
        let reply = self.exchange(&request, "get_result")?;
        if reply.get("rc").is_some_and(|rc| rc != "0") {
            return Err(BootstrapError::KeyNotFound {
                key: key.to_owned(),
                detail: reply.get("msg").unwrap_or("").to_owned(),
            });
        }
        Ok(text_field(&reply, "value")?.to_owned())
    }

    /// `barrier_in` … `barrier_out`: every rank's puts are visible to every rank afterwards.
    fn fence(&mut self) -> Result<(), BootstrapError> {
        let reply = self.exchange(&Message::new("barrier_in"), "barrier_out")?;
        if let Some(rc) = reply.get("rc").filter(|rc| *rc != "0") {
            return Err(BootstrapError::BarrierFailed {
                detail: format!("rc={rc} {}", reply.get("msg").unwrap_or("")),
            });
        }
        Ok(())
    }

    /// Asks the launcher to end the whole job with `code` (PMI-1 carries no text). No reply is
    /// awaited: the launcher kills this process.
    fn abort(&mut self, code: i32, _message: &str) -> Result<(), BootstrapError> {
        self.send(&Message::new("abort").with("exitcode", code))
    }

    /// Ends the hang-up watch (the server may close the channel after its acknowledgement),
    /// then `finalize`.
    fn finalize(&mut self) -> Result<(), BootstrapError> {
        self.channel.end_watch();
        self.call(&Message::new("finalize"), "finalize_ack")?;
        Ok(())
    }
}

/// Field `key` of `message`.
fn text_field<'m>(message: &'m Message, key: &str) -> Result<&'m str, BootstrapError> {
    message.get(key).ok_or_else(|| BootstrapError::Unexpected {
        awaiting: format!("field `{key}` in `{}`", message.cmd()),
        got: excerpt(message.encode().trim_end().as_bytes()),
    })
}

/// Field `key` of `message` as a number.
fn number_field<T: std::str::FromStr>(message: &Message, key: &str) -> Result<T, BootstrapError> {
    let text = text_field(message, key)?;
    text.parse().map_err(|_| BootstrapError::Unexpected {
        awaiting: format!("a number in field `{key}` of `{}`", message.cmd()),
        got: excerpt(text.as_bytes()),
    })
}
