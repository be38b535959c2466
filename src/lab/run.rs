//! Running the lab: the check of an external target, the cells' servers started, the
//! warm-up and the rounds (every cell once per round, in a random order), stopped by
//! [`super::Control`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;

use super::capacity;
use super::limits::crypto_limits;
use super::live::{Live, start_cell};
use super::matrix::{Cell, Group};
use super::pin::Pinning;
use super::prepare::{Prepared, client_options, prepare, runnable};
use super::recommend::recommend;
use super::result::LabResult;
use super::result::{CellCapacity, GroupResult, Machine, RunOptions};
use super::server::LabServer;
use super::summarize::{CellRounds, aa_tally, finish_group};
use super::{Control, Event, External, LabError, LabOptions};
use crate::client::config as client_config;
use crate::client::target::Target;
use crate::load::{self, LoadGenOptions, Progress};

/// Runs the lab. `on_event` sees progress; `control` can stop it (the groups finished
/// so far are returned, marked interrupted).
pub async fn run(
    opts: &LabOptions,
    on_event: &(dyn Fn(Event) + Sync),
    control: &Control,
) -> Result<LabResult, LabError> {
    let started_wall = time::OffsetDateTime::now_utc();
    let t0 = Instant::now();
    let external = opts.target.as_ref();
    let plan = plan(opts, external);
    let steps = plan.iter().map(|(_, c)| c.len() * opts.rounds).sum();
    on_event(Event::Planned {
        groups: plan.len(),
        steps,
    });
    if let (Some(ext), Some((_, cells))) = (external, plan.first()) {
        on_event(Event::Preparing(format!("connecting to {}", ext.target)));
        preflight(ext, &cells[0]).await?;
    }
    let prep = match external {
        Some(_) => None,
        None => Some(prepare(opts, on_event)?),
    };
    let notes = notes(opts, prep.as_ref(), external);
    let mut runner = GroupRunner {
        opts,
        external,
        prep: prep.as_ref(),
        on_event,
        control,
        step: 0,
        steps,
    };
    let mut groups = Vec::new();
    let mut interrupted = false;
    let planned = plan.len();
    for (group, cells) in plan {
        let n = cells.len();
        match runner.run(group, cells).await? {
            Some(finished) => {
                on_event(Event::GroupDone {
                    group,
                    index: groups.len() + 1,
                    groups: planned,
                    cells: n,
                    elapsed_s: t0.elapsed().as_secs_f64(),
                    warnings: finished.warnings.clone(),
                });
                groups.push(finished);
            }
            None => {
                interrupted = true;
                break;
            }
        }
    }
    let crypto_limits = if external.is_none() && !groups.is_empty() && !control.stopped() {
        on_event(Event::Preparing("crypto limits".into()));
        crypto_limits(&mut groups)
    } else {
        Vec::new()
    };
    // With `--slo`, the capacity gains come first: the headline figure.
    let mut recommendations = match &opts.slo {
        Some(slo) => capacity::recommend(&groups, slo, opts.link.is_some()),
        None => Vec::new(),
    };
    recommendations.sort_by(|a, b| b.gain.total_cmp(&a.gain));
    let (recommended, trade_offs) = recommend(&groups, opts.link.as_ref());
    recommendations.extend(recommended);
    let aa_control = aa_tally(&groups);
    Ok(LabResult {
        schema: <LabResult as crate::doc::Document>::SCHEMA.to_string(),
        started: started_wall
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        duration_s: t0.elapsed().as_secs_f64(),
        machine: machine(opts.pinning.clone()),
        options: run_options(opts, external),
        interrupted,
        groups,
        recommendations,
        trade_offs,
        crypto_limits,
        notes,
        aa_control,
        slo: opts.slo.clone(),
        link_counters: None,
    })
}

/// The groups to run and their cells, baseline first and the A/A control last (`--null`:
/// copies of the baseline); against an external server, the client-side groups only.
fn plan(opts: &LabOptions, external: Option<&External>) -> Vec<(Group, Vec<Cell>)> {
    opts.groups
        .iter()
        .filter(|g| external.is_none() || g.client_side())
        .map(|&g| (g, runnable(g, opts.full, external)))
        .map(|(g, cells)| (g, if opts.null { null_cells(cells) } else { cells }))
        .filter(|(_, cells)| cells.len() >= 2)
        .map(|(g, mut cells)| {
            // The A/A control: the baseline again, compared like any other cell.
            let control = cells[0].control_of();
            cells.push(control);
            (g, cells)
        })
        .collect()
}

/// The report's notes: the client's trust bundle, the groups an external server skips.
fn notes(opts: &LabOptions, prep: Option<&Prepared>, external: Option<&External>) -> Vec<String> {
    let mut notes: Vec<String> = Vec::new();
    if let Some(p) = prep {
        notes.push(format!("Client trust bundle: {}.", p.bundle_note));
    }
    if external.is_some() {
        let skipped: Vec<&str> = opts
            .groups
            .iter()
            .filter(|g| !g.client_side())
            .map(|g| g.name())
            .collect();
        if !skipped.is_empty() {
            notes.push(format!(
                "Against an external server only client-side groups run; skipped: {}.",
                skipped.join(", ")
            ));
        }
    }
    notes
}

/// The options a result records.
fn run_options(opts: &LabOptions, external: Option<&External>) -> RunOptions {
    RunOptions {
        mode: if opts.full { "full" } else { "quick" }.into(),
        null: opts.null,
        rounds: opts.rounds,
        round_s: opts.round_time.as_secs_f64(),
        warmup_s: opts.warmup.as_secs_f64(),
        connections: opts.connections,
        target: external.map(|e| e.target.to_string()),
        link: opts.link.as_ref().map(|l| l.spec.clone()),
        link_rtt_ms: opts.link.as_ref().map(|l| l.rtt.as_secs_f64() * 1e3),
        body_size: (opts.body_size > 0).then_some(opts.body_size),
    }
}

/// Runs the groups of the plan one after the other, counting the rounds for the
/// progress events.
struct GroupRunner<'a> {
    opts: &'a LabOptions,
    external: Option<&'a External>,
    prep: Option<&'a Prepared>,
    on_event: &'a (dyn Fn(Event) + Sync),
    control: &'a Control,
    /// Rounds run so far, of `steps` in all.
    step: usize,
    steps: usize,
}

impl GroupRunner<'_> {
    /// One group: its cells started, warmed up, their rounds, with `--slo` their
    /// capacities; `None` when stopped (the group is then left out).
    async fn run(
        &mut self,
        group: Group,
        cells: Vec<Cell>,
    ) -> Result<Option<GroupResult>, LabError> {
        let mut live = self.start(group, cells)?;
        if !self.warm_up(group, &mut live).await? || !self.rounds(group, &mut live).await? {
            return Ok(None);
        }
        // `--slo`: each configuration's capacity, after the rounds (its servers still
        // up).
        let Some(capacities) = self.capacities(group, &live).await? else {
            return Ok(None);
        };
        let cells = live
            .into_iter()
            .map(|l| CellRounds {
                cell: l.cell,
                rounds: l.rounds,
                server_cpu: l.server_cpu,
            })
            .collect();
        let mut finished = finish_group(group, cells, self.opts.link.is_some());
        // One capacity per cell, in the cells' order (finish_group keeps it).
        for (c, cap) in finished.cells.iter_mut().zip(capacities) {
            c.capacity = Some(cap);
        }
        Ok(Some(finished))
    }

    /// Starts every cell of `group`: its servers (or, against an external server, its
    /// client).
    fn start(&self, group: Group, cells: Vec<Cell>) -> Result<Vec<Live>, LabError> {
        let mut live = Vec::new();
        for cell in cells {
            (self.on_event)(Event::Preparing(format!(
                "{} / {}: {}",
                group.name(),
                cell.name,
                if self.external.is_some() {
                    "preparing the client"
                } else {
                    "starting servers"
                }
            )));
            live.push(start_cell(cell, self.prep, self.external, self.opts)?);
        }
        Ok(live)
    }

    /// One unrecorded round per cell (none without a warm-up); `false` when stopped.
    async fn warm_up(&self, group: Group, live: &mut [Live]) -> Result<bool, LabError> {
        let (opts, control) = (self.opts, self.control);
        if opts.warmup.is_zero() {
            return Ok(true);
        }
        for l in live {
            if control.stopped() {
                return Ok(false);
            }
            (self.on_event)(Event::Preparing(format!(
                "{} / {}: warming up",
                group.name(),
                l.cell.name
            )));
            if !run_round(l, opts, self.external, control, opts.warmup, false).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The recorded rounds; `false` when stopped.
    async fn rounds(&mut self, group: Group, live: &mut [Live]) -> Result<bool, LabError> {
        let (opts, control) = (self.opts, self.control);
        // Each round runs every cell once, in a new random order: drift of the machine
        // spreads over the cells instead of following their position.
        let mut order: Vec<usize> = (0..live.len()).collect();
        for round in 1..=opts.rounds {
            order.shuffle(&mut rand::rng());
            for &i in &order {
                let l = &mut live[i];
                if control.stopped() {
                    return Ok(false);
                }
                self.step += 1;
                (self.on_event)(Event::Round {
                    group,
                    cell: l.cell.name.clone(),
                    round,
                    step: self.step,
                    steps: self.steps,
                });
                let done =
                    run_round(l, opts, self.external, control, opts.round_time, true).await?;
                if !done {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// With `--slo`, each cell's capacity (none without); `None` when stopped.
    async fn capacities(
        &self,
        group: Group,
        live: &[Live],
    ) -> Result<Option<Vec<CellCapacity>>, LabError> {
        let mut capacities = Vec::new();
        let Some(slo) = &self.opts.slo else {
            return Ok(Some(capacities));
        };
        for l in live {
            (self.on_event)(Event::Preparing(format!(
                "{} / {}: capacity at {slo} (at most {} s)",
                group.name(),
                l.cell.name,
                self.opts.slo_time.as_secs()
            )));
            let found = capacity::search(
                l,
                self.opts,
                slo,
                self.opts.slo_time,
                self.external,
                self.control,
            )
            .await?;
            match found {
                Some(c) => capacities.push(c),
                None => return Ok(None),
            }
        }
        Ok(Some(capacities))
    }
}

/// One request to the external server with the first cell's client configuration,
/// before anything is measured: a server that is down, or whose certificate the lab
/// cannot verify, stops the run here with the reason.
async fn preflight(ext: &External, cell: &Cell) -> Result<(), LabError> {
    let copts = client_options(cell, None, Some(ext))?;
    let built = client_config::build(&copts).map_err(|source| LabError::Client {
        cell: format!("{}/{}", cell.group.name(), cell.name),
        source,
    })?;
    let request = crate::client::http1::get_request(&ext.target.authority, &ext.target.path, true);
    crate::client::exchange::exchange(
        &ext.target,
        built.config,
        &request,
        false,
        Duration::from_secs(5),
    )
    .await
    .map(|_| ())
    .map_err(|source| LabError::Unreachable {
        target: format!("{}:{}", ext.target.host, ext.target.port),
        source,
    })
}

/// One round of a cell, `duration` long, kept when `record` (else a warm-up); `false`
/// when stopped.
async fn run_round(
    l: &mut Live,
    opts: &LabOptions,
    external: Option<&External>,
    control: &Control,
    duration: Duration,
    record: bool,
) -> Result<bool, LabError> {
    let target = match external {
        Some(e) => e.target.clone(),
        None => Target::parse(&format!("https://localhost:{}/", l.addrs[0].port()), None).map_err(
            |e| LabError::Prepare {
                dir: opts.work_dir.clone(),
                reason: e.to_string(),
            },
        )?,
    };
    let load_opts = LoadGenOptions {
        requests: None,
        duration: Some(duration),
        connections: opts.connections,
        rate: None,
        requests_per_conn: Some(1),
        http2: false,
        http3: l.cell.quic,
        body_size: opts.body_size,
        timeout: Duration::from_secs(5),
        threads: 1,
        server_pid: l.servers.first().map(LabServer::pid),
        ok_status: Default::default(),
        resume: l.cell.resume,
        echo: BTreeMap::new(),
        early_data: l.cell.early_data,
        verdicts: None,
        addrs: l.addrs.clone(),
        config_per_connection: l.factory.clone(),
        schedule_offset: Duration::ZERO,
        warmup: Duration::ZERO,
        start_at: None,
    };
    let cpu0: Vec<Option<Duration>> = l
        .servers
        .iter()
        .map(|s| load::usage::proc_cpu_precise(s.pid()).ok())
        .collect();
    let progress = Arc::new(Progress::default());
    control.round(Some(Arc::clone(&progress)));
    let result = load::run(target, Arc::clone(&l.config), load_opts, progress).await;
    control.round(None);
    let result = result.map_err(|source| LabError::Load {
        cell: format!("{}/{}", l.cell.group.name(), l.cell.name),
        source,
    })?;
    if result.interrupted || control.stopped() {
        return Ok(false);
    }
    let cpu: Option<f64> = l
        .servers
        .iter()
        .zip(&cpu0)
        .map(|(s, c0)| {
            let c1 = load::usage::proc_cpu_precise(s.pid()).ok()?;
            Some(c1.saturating_sub((*c0)?).as_secs_f64())
        })
        .sum();
    if record {
        l.server_cpu.push(cpu.filter(|_| !l.servers.is_empty()));
        l.rounds.push(result);
    }
    Ok(true)
}

pub(super) fn machine(pinning: Pinning) -> Machine {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    Machine {
        // The CPUs available before pinning (after it, this process sees one).
        cores: if pinning.available.is_empty() {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            pinning.available.len()
        },
        cpu,
        kernel,
        pinning,
    }
}

/// `--null`: the group's baseline, then as many copies of it as the group has other
/// configurations, each under its own name: every comparison of the run is A against A.
fn null_cells(cells: Vec<Cell>) -> Vec<Cell> {
    let Some(base) = cells.first().cloned() else {
        return cells;
    };
    let copies = (1..cells.len()).map(|i| Cell {
        name: format!("null-{i}"),
        label: format!("the baseline ({}) again, null copy {i}", base.label),
        ..base.clone()
    });
    std::iter::once(base.clone()).chain(copies).collect()
}
