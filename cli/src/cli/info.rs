//! `circulant info`: the libfabric version and the providers usable for one-sided collectives.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use serde::Serialize;

use circulant::comm::Carrier;
use circulant::comm::Config;
use circulant::fabric::{self, mode_names, Hints, Info};

use super::CliResult;

/// Remote CQ data the transport needs: a 32-bit arrival tag.
const MIN_CQ_DATA: usize = 4;

#[derive(clap::Args)]
pub struct Args {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Report {
    libfabric: Versions,
    providers: Vec<Provider>,
    /// Providers with RDM endpoints and RMA but without enough remote CQ data.
    without_cq_data: Vec<String>,
}

#[derive(Serialize)]
struct Versions {
    library: String,
    headers: String,
}

#[derive(Serialize)]
struct Provider {
    name: String,
    /// (fabric, domain) of every entry fi_getinfo returned for the provider.
    domains: Vec<Domain>,
    iov_limit: usize,
    rma_iov_limit: usize,
    cq_data_size: usize,
    inject_size: usize,
    max_msg_size: usize,
    mr_mode: Vec<String>,
    mode: Vec<String>,
    data_progress: String,
    control_progress: String,
    /// Local segments of one merged write a job on this provider uses: `iov_limit`, lowered
    /// by `CIRCULANT_IOV_LIMIT` (without it, to 2 over `tcp` providers).
    merged_iov_limit: usize,
    /// Remote segments of one merged write: `rma_iov_limit`, lowered likewise.
    merged_rma_iov_limit: usize,
    /// Most bytes of one write: `max_msg_size` (`null` when the provider has no cap), lowered
    /// by `CIRCULANT_MAX_WRITE_BYTES`.
    merged_max_write_bytes: Option<usize>,
    /// How eager messages reach their receive slots on this provider: `memory` (stores into
    /// memory shared by the ranks of one host) or `write` (RMA writes with remote CQ data;
    /// `CIRCULANT_EAGER_CARRIER=write` forces it).
    eager_carrier: &'static str,
}

#[derive(Serialize, PartialEq)]
struct Domain {
    fabric: String,
    domain: String,
}

impl Provider {
    fn from_info(info: &Info, config: &Config) -> Self {
        let merged = config.write_limits(info);
        Provider {
            name: info.provider(),
            domains: Vec::new(),
            iov_limit: info.iov_limit(),
            rma_iov_limit: info.rma_iov_limit(),
            cq_data_size: info.cq_data_size(),
            inject_size: info.inject_size(),
            max_msg_size: info.max_msg_size(),
            mr_mode: info.mr_mode().names(),
            mode: mode_names(info.mode()),
            data_progress: info.data_progress().to_string(),
            control_progress: info.control_progress().to_string(),
            merged_iov_limit: merged.iov,
            merged_rma_iov_limit: merged.rma_iov,
            merged_max_write_bytes: merged.caps_bytes().then_some(merged.max_bytes),
            eager_carrier: match config.eager_carrier_for(&info.provider()) {
                Carrier::Memory => "memory",
                Carrier::Write => "write",
            },
        }
    }
}

fn report(config: &Config) -> Result<Report, fabric::FabricError> {
    // The transport's own query: FI_EP_RDM, FI_RMA, the modes it handles. FI_PROVIDER, if set,
    // restricts what libfabric loads.
    let infos = Info::query(&Hints::rdm_rma())?;
    let mut providers: BTreeMap<String, Provider> = BTreeMap::new();
    let mut order = Vec::new();
    let mut without_cq_data = Vec::new();
    for info in &infos {
        let name = info.provider();
        if info.cq_data_size() < MIN_CQ_DATA {
            if !without_cq_data.contains(&name) {
                without_cq_data.push(name);
            }
            continue;
        }
        let provider = providers.entry(name.clone()).or_insert_with(|| {
            order.push(name.clone());
            Provider::from_info(info, config)
        });
        let domain = Domain {
            fabric: info.fabric_name(),
            domain: info.domain_name(),
        };
        // One entry per address format and endpoint flavour: list each domain once.
        if !provider.domains.contains(&domain) {
            provider.domains.push(domain);
        }
    }
    Ok(Report {
        libfabric: Versions {
            library: fabric::library_version().to_string(),
            headers: fabric::header_version().to_string(),
        },
        providers: order
            .iter()
            .filter_map(|name| providers.remove(name))
            .collect(),
        without_cq_data,
    })
}

fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "libfabric {} (headers {})",
        report.libfabric.library, report.libfabric.headers
    );
    if report.providers.is_empty() {
        let _ = writeln!(
            out,
            "no provider offers FI_EP_RDM with FI_RMA and remote CQ data"
        );
    } else {
        let _ = writeln!(
            out,
            "providers with FI_EP_RDM, FI_RMA and remote CQ data (>= {MIN_CQ_DATA} bytes):"
        );
    }
    for p in &report.providers {
        out.push('\n');
        let _ = writeln!(out, "{}", p.name);
        let domains: Vec<String> = p
            .domains
            .iter()
            .map(|d| format!("{}/{}", d.fabric, d.domain))
            .collect();
        let _ = writeln!(out, "  fabric/domain   {}", domains.join(", "));
        let _ = writeln!(out, "  iov_limit       {}", p.iov_limit);
        let _ = writeln!(out, "  rma_iov_limit   {}", p.rma_iov_limit);
        let _ = writeln!(
            out,
            "  merged writes   up to {} local and {} remote segments{}",
            p.merged_iov_limit,
            p.merged_rma_iov_limit,
            p.merged_max_write_bytes
                .map_or(String::new(), |n| format!(", at most {n} bytes"))
        );
        let carrier = match p.eager_carrier {
            "memory" => "stores into slots in shared memory",
            _ => "RMA writes into registered slots",
        };
        let _ = writeln!(out, "  eager carrier   {carrier}");
        let _ = writeln!(out, "  cq_data_size    {}", p.cq_data_size);
        let _ = writeln!(out, "  inject_size     {}", p.inject_size);
        let _ = writeln!(out, "  max_msg_size    {}", p.max_msg_size);
        let _ = writeln!(out, "  mr_mode         {}", join_or_zero(&p.mr_mode));
        let _ = writeln!(out, "  mode            {}", join_or_zero(&p.mode));
        let _ = writeln!(
            out,
            "  progress        data {}, control {}",
            p.data_progress, p.control_progress
        );
    }
    if !report.without_cq_data.is_empty() {
        out.push('\n');
        let _ = writeln!(
            out,
            "without remote CQ data (not usable): {}",
            report.without_cq_data.join(", ")
        );
    }
    out
}

fn join_or_zero(names: &[String]) -> String {
    if names.is_empty() {
        "0".to_string()
    } else {
        names.join("|")
    }
}

pub fn run(args: Args) -> CliResult {
    // The limits a job would merge writes under: the provider's, lowered by the variables or
    // the provider's default cap.
    let report = report(&Config::write_limits_from_env()?)?;
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        table(&report)
    };
    // A closed pipe (`circulant info | head`) is not an error of ours.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => return Err(err.into()),
        _ => {}
    }
    Ok(if report.providers.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
