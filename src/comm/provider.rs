//! Joining a job: which libfabric provider it uses, and connecting its ranks over it.

use std::sync::Arc;
use std::time::Instant;

use crate::bootstrap::{Bootstrap, BootstrapError, NodeMap, NodeSource};
use crate::fabric::{Hints, Info};
use crate::plan::CostModel;
use crate::transport::{provider_iov_limits, Card, CardSource, Opened, Transport};

use super::communicator::{Communicator, Job};
use super::config::{Config, DEFAULT_NODE_PROVIDER};
use super::error::{CommError, Result};

impl Communicator {
    /// Joins the job this process was started in (see [`crate::bootstrap`]; a process started
    /// alone is rank 0 of 1), with the configuration from the environment ([`Config`]).
    pub fn init() -> Result<Communicator> {
        Self::init_with(Config::from_env()?)
    }

    /// Joins the job named by the environment (PMI), with an explicit configuration.
    pub fn init_with(config: Config) -> Result<Communicator> {
        Self::init_over(Bootstrap::from_env()?, config)
    }

    /// Rank `rank` of `size` processes that bootstrap through the caller's `allgather` of
    /// fixed-size records: `allgather(send, recv)` must give every rank all ranks' `send`
    /// (the same length everywhere) in rank order in `recv`. For programs that already have
    /// MPI, a TCP store or their own launcher. Every rank must call it.
    pub fn init_oob<F>(rank: usize, size: usize, allgather: F) -> Result<Communicator>
    where
        F: FnMut(&[u8], &mut [u8]) -> std::result::Result<(), String> + Send + 'static,
    {
        let bootstrap = Bootstrap::oob(rank, size, Box::new(allgather))?;
        Self::init_over(bootstrap, Config::from_env()?)
    }

    /// Joins a job through `bootstrap`.
    pub fn init_over(bootstrap: Bootstrap, config: Config) -> Result<Communicator> {
        let job = Arc::new(Job::new(bootstrap));
        let connected = connect(&job, &config)?;
        // Inside a node the node provider's rough model, where the job may use one, unless
        // CIRCULANT_ALPHA_INSIDE and CIRCULANT_BETA_INSIDE say otherwise.
        let mut config = config;
        if let Some(inside) = connected.inside {
            config.alpha_inside.get_or_insert(inside.alpha);
            config.beta_inside.get_or_insert(inside.beta);
        }
        let levels = config.levels(connected.model);
        let mut comm = Communicator::new(connected.transport, job, config, levels, connected.nodes);
        comm.cards_at_start = connected.cards_at_start;
        // Every endpoint is up before the first collective (a plan's barrier: the node phases
        // split communicators at their first call, which a job's start need not).
        comm.plain_barrier()?;
        Ok(comm)
    }
}

/// The key under which each rank publishes its provider and card.
const CARD_KEY: &str = "card";

/// A connected transport, the α-β model for its provider (and for the node provider that
/// reaches the ranks of one node, where the job may use one: the same on every rank), the
/// job's node map, and how many of the other ranks' cards were read at start.
pub(super) struct Connected {
    pub transport: Transport,
    pub nodes: NodeMap,
    pub model: CostModel,
    pub inside: Option<CostModel>,
    pub cards_at_start: usize,
}

/// Connects the ranks of `job`: learns the node of every rank (see [`Bootstrap::node_map`]),
/// chooses the provider, opens this rank's endpoint and publishes its address card. Where the key-value space keeps every rank's data on this node
/// after the fence, every card is read now; elsewhere (PMI-1 and PMI-2 outside Slurm, where
/// each get is a request to the launcher's one server) a peer's card is fetched when an
/// operation first writes to it, and so it is in jobs whose key-value space lives in this
/// process (in-memory, out-of-band), which saves inserting addresses that are never used.
pub(super) fn connect(job: &Arc<Job>, config: &Config) -> Result<Connected> {
    let mut bootstrap = job.lock();
    let (rank, size) = (bootstrap.rank(), bootstrap.size());
    // At most two key-value exchanges: the hosts, unless the launcher tells the node of
    // every rank, then each rank's provider with its card. Where the provider does not
    // depend on the nodes (configured and not pinned to loopback), the hosts go with the
    // cards' fence instead of one of their own.
    let launcher_map = match config.node_map {
        NodeSource::Launcher => bootstrap.launcher_node_map(),
        NodeSource::Hosts => None,
    };
    let hosts_with_cards = launcher_map.is_none() && config.provider.is_some() && !config.loopback;
    let early = match launcher_map {
        Some(map) => Some(map),
        None if hosts_with_cards => None,
        None => Some(bootstrap.node_map(NodeSource::Hosts)?),
    };
    let one_host = early.as_ref().is_some_and(|map| map.nodes() == 1);
    let info = choose_provider(config, one_host)?;
    let ours = info.provider();
    let model = config.model_for(&ours);
    // The node fabric: where the job may span several nodes. Every rank caps its merged
    // writes by that provider's limits, whether it opens one or not, so all merge alike; a
    // rank opens it where ranks may share its node.
    let node_info = match early.as_ref() {
        Some(map) if map.nodes() == 1 => None,
        _ => node_provider(config, &ours)?,
    };
    let open_node = node_info.as_ref().filter(|_| {
        early
            .as_ref()
            .map_or(true, |map| map.local_ranks().len() > 1)
    });
    let inside = node_info
        .as_ref()
        .map(|node| Config::default().model_for(&node.provider()));
    let opened = Opened::open(&info, open_node, rank, size)?
        .cap_iov(config.iov_cap_for(&ours))
        .cap_iov(node_info.as_ref().map(provider_iov_limits));
    // [provider length: 1 byte][provider][card]; provider names are a few bytes long.
    let name = &ours.as_bytes()[..ours.len().min(usize::from(u8::MAX))];
    let card = opened.card()?.to_bytes();
    let mut mine = Vec::with_capacity(1 + name.len() + card.len());
    mine.push(name.len() as u8);
    mine.extend_from_slice(name);
    mine.extend_from_slice(&card);
    let read_all = bootstrap.gets_are_local() && !matches!(bootstrap.kind(), "memory" | "oob");
    if hosts_with_cards {
        bootstrap.publish_host()?;
    }
    if !read_all {
        bootstrap.put_bytes(&Bootstrap::rank_key(rank, CARD_KEY), &mine)?;
        bootstrap.fence()?;
        let nodes = match early {
            Some(map) => map,
            None => bootstrap.read_host_map()?,
        };
        drop(bootstrap);
        let source = KeyValueCards {
            job: Arc::clone(job),
            provider: name.to_vec(),
            failed: None,
        };
        let mates = mates(&nodes);
        return Ok(Connected {
            transport: opened.connect_lazily(Box::new(source), &mates, config.deadline)?,
            model,
            inside,
            nodes,
            cards_at_start: 0,
        });
    }
    let cards = bootstrap
        .exchange(CARD_KEY, &mine)?
        .iter()
        .enumerate()
        .map(|(r, entry)| read_card(r, entry, name))
        .collect::<Result<Vec<Card>>>()?;
    let nodes = match early {
        Some(map) => map,
        None => bootstrap.read_host_map()?,
    };
    Ok(Connected {
        transport: opened.connect(&cards, &mates(&nodes), config.deadline)?,
        model,
        inside,
        nodes,
        cards_at_start: size - 1,
    })
}

/// Per rank, whether it shares this rank's node in a job on several nodes (the ranks the node
/// fabric reaches); none on one node, where the job's provider was chosen for that node.
pub(super) fn mates(nodes: &NodeMap) -> Vec<bool> {
    if nodes.nodes() > 1 {
        on_this_node(nodes)
    } else {
        vec![false; nodes.size()]
    }
}

/// Per rank, whether it is on this rank's node: the ranks a communicator split from a job on
/// several nodes reaches through the node fabric it inherited, on one node too.
pub(super) fn on_this_node(nodes: &NodeMap) -> Vec<bool> {
    let me = nodes.node();
    (0..nodes.size())
        .map(|r| nodes.node_of(r) == Some(me))
        .collect()
}

/// The provider for the ranks of one node beside the network provider `ours`: the configured
/// one (`shm` by default) unless it is the network provider itself. Where libfabric does not
/// offer the default with remote CQ data, none; another one named but not offered is an
/// error.
fn node_provider(config: &Config, ours: &str) -> Result<Option<Info>> {
    let Some(name) = config.node_provider.as_deref() else {
        return Ok(None);
    };
    if name == ours {
        return Ok(None);
    }
    let mut hints = Hints::rdm_rma().provider(name);
    hints.auth_key = config.auth_key.clone();
    let found = Info::query(&hints)
        .unwrap_or_default()
        .into_iter()
        .find(|i| i.cq_data_size() >= 4);
    if found.is_none() && name != DEFAULT_NODE_PROVIDER {
        return Err(CommError::NoProvider(format!(
            " named {name} (CIRCULANT_NODE_PROVIDER) for the ranks of one node"
        )));
    }
    Ok(found)
}

/// The card in `rank`'s entry, which must name the provider `ours`.
fn read_card(rank: usize, entry: &[u8], ours: &[u8]) -> Result<Card> {
    let split = entry
        .split_first()
        .filter(|(&n, rest)| rest.len() >= usize::from(n))
        .map(|(&n, rest)| rest.split_at(usize::from(n)));
    match split {
        Some((theirs, card)) if theirs == ours => Ok(Card::from_bytes(card)?),
        _ => Err(CommError::ProviderMismatch {
            rank,
            theirs: split.map_or("(an unreadable card)".into(), |(theirs, _)| {
                String::from_utf8_lossy(theirs).into_owned()
            }),
            ours: String::from_utf8_lossy(ours).into_owned(),
        }),
    }
}

/// The ranks' cards in the job's key-value space, read one at a time.
struct KeyValueCards {
    job: Arc<Job>,
    /// This rank's provider, which every card must name.
    provider: Vec<u8>,
    /// Why the key-value space failed, once it has: it is not asked again, as a reply that
    /// came late would be taken for the answer to the next request.
    failed: Option<String>,
}

impl KeyValueCards {
    fn fetch(
        &self,
        bootstrap: &mut Bootstrap,
        rank: usize,
        deadline: Instant,
    ) -> std::result::Result<Vec<u8>, BootstrapError> {
        let usual = bootstrap.timeout();
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(BootstrapError::Deadline {
                awaiting: format!("rank {rank}'s address card"),
                timeout: usual,
            });
        }
        bootstrap.set_timeout(left.min(usual))?;
        let entry = bootstrap.get_bytes(&Bootstrap::rank_key(rank, CARD_KEY));
        bootstrap.set_timeout(usual)?;
        entry
    }
}

impl CardSource for KeyValueCards {
    fn card(
        &mut self,
        rank: usize,
        deadline: Instant,
    ) -> std::result::Result<Card, Box<dyn std::error::Error + Send + Sync>> {
        if let Some(why) = &self.failed {
            return Err(format!("the job's key-value space failed earlier: {why}").into());
        }
        let entry = {
            let mut bootstrap = self.job.lock();
            self.fetch(&mut bootstrap, rank, deadline)
        };
        match entry {
            Ok(entry) => Ok(read_card(rank, &entry, &self.provider)?),
            Err(error) => {
                self.failed = Some(error.to_string());
                Err(error.into())
            }
        }
    }
}

/// The provider: the configured one, else `shm` when every rank is on this host, else the
/// first RMA-capable network provider. Network providers are pinned to loopback when every
/// rank is on one host.
fn choose_provider(config: &Config, one_host: bool) -> Result<Info> {
    let query = |name: Option<&str>, loopback: bool| -> Result<Vec<Info>> {
        let mut hints = Hints::rdm_rma();
        hints.auth_key = config.auth_key.clone();
        if let Some(name) = name {
            hints = hints.provider(name);
        }
        if loopback && name != Some("shm") {
            hints = hints.node("127.0.0.1");
        }
        Ok(Info::query(&hints)?
            .into_iter()
            .filter(|i| i.cq_data_size() >= 4)
            .collect())
    };
    if let Some(name) = config.provider.as_deref() {
        let found = query(Some(name), one_host && config.loopback)?;
        return found
            .into_iter()
            .next()
            .ok_or_else(|| CommError::NoProvider(format!(" named {name}")));
    }
    if one_host {
        if let Some(info) = query(Some("shm"), false)?.into_iter().next() {
            return Ok(info);
        }
    }
    query(None, one_host && config.loopback)?
        .into_iter()
        .find(|i| i.provider() != "shm")
        .ok_or_else(|| CommError::NoProvider(String::new()))
}
