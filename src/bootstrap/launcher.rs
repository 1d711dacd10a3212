//! Which launcher started this process, as its environment shows, and which PMI to speak.
//! A launch of several ranks that leaves no PMI this library can use must fail at start-up:
//! running on as a singleton would give p copies of a one-rank job.

use super::BootstrapError;

/// Environment variable choosing the PMI: `auto` (default), `pmi1`, `pmi2` or `pmix`.
pub const PMI_ENV: &str = "CIRCULANT_PMI";

/// The PMI asked for by [`PMI_ENV`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmiChoice {
    /// PMIx where its variables are set; on `PMI_FD`/`PMI_PORT`, PMI-2 under a Slurm step if the
    /// server accepts it, else PMI-1.
    Auto,
    /// PMI-1 over `PMI_FD` or `PMI_PORT`.
    Pmi1,
    /// PMI-2 over `PMI_FD` or `PMI_PORT` (falls back to PMI-1 if the server refuses it).
    Pmi2,
    /// PMIx through the system's libpmix.
    Pmix,
}

impl PmiChoice {
    /// The choice in `CIRCULANT_PMI` (auto when unset); an error names the accepted values.
    pub fn from_env() -> Result<Self, BootstrapError> {
        match std::env::var(PMI_ENV) {
            Err(_) => Ok(PmiChoice::Auto),
            Ok(text) => Self::parse(&text).ok_or(BootstrapError::Env {
                var: PMI_ENV,
                value: text,
                reason: "must be auto, pmi1, pmi2 or pmix".into(),
            }),
        }
    }

    /// Parses `auto`, `pmi1`, `pmi2` or `pmix` (case and dashes ignored).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().replace('-', "").as_str() {
            "" | "auto" => Some(PmiChoice::Auto),
            "pmi1" => Some(PmiChoice::Pmi1),
            "pmi2" => Some(PmiChoice::Pmi2),
            "pmix" => Some(PmiChoice::Pmix),
            _ => None,
        }
    }

    /// The name error messages use.
    pub fn name(self) -> &'static str {
        match self {
            PmiChoice::Auto => "auto",
            PmiChoice::Pmi1 => "pmi-1",
            PmiChoice::Pmi2 => "pmi-2",
            PmiChoice::Pmix => "pmix",
        }
    }
}

/// What the environment says about the launch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Detected {
    /// A PMIx server's variables, described (`PMIX_NAMESPACE=... PMIX_RANK=...`).
    pub pmix: Option<String>,
    /// Tasks of a Slurm job step (`SLURM_STEP_NUM_TASKS`, else `SLURM_NTASKS`, within a step).
    pub slurm_tasks: Option<usize>,
    /// Open MPI's `OMPI_COMM_WORLD_SIZE`.
    pub ompi_size: Option<usize>,
    /// Hydra's `MPI_LOCALNRANKS` (set for every rank it starts).
    pub hydra_local_ranks: Option<usize>,
}

/// Reads the launchers' variables from the process environment.
pub fn detect() -> Detected {
    detect_from(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

/// Reads the launchers' variables through `var`.
pub fn detect_from(var: impl Fn(&str) -> Option<String>) -> Detected {
    let number = |name: &str| var(name).and_then(|v| v.trim().parse::<usize>().ok());
    let pmix = match (var("PMIX_NAMESPACE"), var("PMIX_RANK")) {
        (Some(namespace), Some(rank)) => {
            Some(format!("PMIX_NAMESPACE={namespace} PMIX_RANK={rank}"))
        }
        (Some(namespace), None) => Some(format!("PMIX_NAMESPACE={namespace}")),
        (None, Some(rank)) => Some(format!("PMIX_RANK={rank}")),
        (None, None) => None,
    };
    // SLURM_NTASKS alone is also set in a batch script, which is one process: only a step
    // (SLURM_STEP_ID) runs its tasks as separate processes.
    let slurm_tasks = var("SLURM_STEP_ID")
        .and_then(|_| number("SLURM_STEP_NUM_TASKS").or_else(|| number("SLURM_NTASKS")));
    Detected {
        pmix,
        slurm_tasks,
        ompi_size: number("OMPI_COMM_WORLD_SIZE"),
        hydra_local_ranks: number("MPI_LOCALNRANKS"),
    }
}

impl Detected {
    /// What was seen and what to do instead, when several ranks were started without a PMI
    /// channel (PMIx variables are handled by the caller: it tries libpmix first).
    pub fn multi_rank_without_pmi(&self) -> Option<(String, String)> {
        if let Some(tasks) = self.slurm_tasks.filter(|&n| n > 1) {
            return Some((
                format!(
                    "Slurm started this step with {tasks} tasks without a PMI (srun --mpi=none?)"
                ),
                "start it with `srun --mpi=pmi2` or `srun --mpi=pmix`".into(),
            ));
        }
        if let Some(size) = self.ompi_size.filter(|&n| n > 1) {
            return Some((
                format!("Open MPI's launcher started {size} ranks (OMPI_COMM_WORLD_SIZE) without PMIx variables"),
                "use an Open MPI built with PMIx (mpirun of Open MPI 4 or newer), or `circulant run`".into(),
            ));
        }
        if let Some(ranks) = self.hydra_local_ranks.filter(|&n| n > 1) {
            return Some((
                format!("Hydra started {ranks} ranks on this node (MPI_LOCALNRANKS) without PMI_FD or PMI_PORT"),
                "use `mpiexec.hydra` with its default PMI, or `circulant run`".into(),
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect_with(vars: &[(&str, &str)]) -> Detected {
        detect_from(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn a_slurm_step_of_several_tasks_is_a_multi_rank_launch() {
        let step = detect_with(&[("SLURM_STEP_ID", "0"), ("SLURM_STEP_NUM_TASKS", "4")]);
        let (seen, advice) = step.multi_rank_without_pmi().expect("detected");
        assert!(seen.contains("Slurm") && seen.contains("4 tasks"), "{seen}");
        assert!(advice.contains("srun --mpi=pmi2"), "{advice}");
        // A batch script (no step) and a one-task step are single processes.
        assert_eq!(
            detect_with(&[("SLURM_NTASKS", "4")]).multi_rank_without_pmi(),
            None
        );
        assert_eq!(
            detect_with(&[("SLURM_STEP_ID", "0"), ("SLURM_STEP_NUM_TASKS", "1")])
                .multi_rank_without_pmi(),
            None
        );
    }

    #[test]
    fn open_mpi_and_hydra_are_recognized() {
        let (seen, _) = detect_with(&[("OMPI_COMM_WORLD_SIZE", "3")])
            .multi_rank_without_pmi()
            .expect("detected");
        assert!(seen.contains("Open MPI"), "{seen}");
        let (seen, _) = detect_with(&[("MPI_LOCALNRANKS", "2")])
            .multi_rank_without_pmi()
            .expect("detected");
        assert!(seen.contains("Hydra"), "{seen}");
        let pmix = detect_with(&[("PMIX_NAMESPACE", "ns"), ("PMIX_RANK", "1")]);
        assert_eq!(pmix.pmix.as_deref(), Some("PMIX_NAMESPACE=ns PMIX_RANK=1"));
        assert_eq!(detect_with(&[]), Detected::default());
    }

    #[test]
    fn choices_parse() {
        assert_eq!(PmiChoice::parse("PMI-2"), Some(PmiChoice::Pmi2));
        assert_eq!(PmiChoice::parse("pmix"), Some(PmiChoice::Pmix));
        assert_eq!(PmiChoice::parse("auto"), Some(PmiChoice::Auto));
        assert_eq!(PmiChoice::parse("pmi3"), None);
    }
}
