//! A cell ready to run ([`Live`]): its servers started, its client configuration built,
//! where to connect, and the rounds measured so far; [`start_cell`] starts one. The
//! rounds ([`super::run`]) and the capacity search ([`super::capacity`]) run against it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;

use super::matrix::{Cell, Trust};
use super::prepare::{Prepared, client_options, reloaded_config, server_args};
use super::server::LabServer;
use super::{External, LabError, LabOptions};
use crate::client::config as client_config;
use crate::load::{ConfigFactory, LoadResult};

/// A cell ready to run: its servers, client configuration and where to connect.
pub(super) struct Live {
    pub(super) cell: Cell,
    pub(super) servers: Vec<LabServer>,
    pub(super) addrs: Vec<SocketAddr>,
    pub(super) config: Arc<ClientConfig>,
    pub(super) factory: Option<ConfigFactory>,
    pub(super) rounds: Vec<LoadResult>,
    pub(super) server_cpu: Vec<Option<f64>>,
}

pub(super) fn start_cell(
    cell: Cell,
    prep: Option<&Prepared>,
    external: Option<&External>,
    opts: &LabOptions,
) -> Result<Live, LabError> {
    let mut servers = Vec::new();
    let mut addrs = Vec::new();
    if let Some(prep) = prep {
        // Long enough for every round of the run, bounded in any case.
        let bound = Duration::from_secs(600);
        for _ in 0..cell.instances {
            let s = LabServer::start(
                &opts.exe,
                &server_args(&cell, prep),
                bound,
                opts.pinning.server_cpu,
                opts.link.as_ref().map(|l| &*l.server_netns),
            )?;
            addrs.push(s.addr);
            servers.push(s);
        }
    }
    let copts = client_options(&cell, prep, external)?;
    let built = client_config::build(&copts).map_err(|source| LabError::Client {
        cell: format!("{}/{}", cell.group.name(), cell.name),
        source,
    })?;
    let factory = match (cell.trust, prep, external) {
        (Trust::ReloadPerConnection, Some(prep), _) => {
            let bundle = prep.bundle.clone();
            let copts = Arc::new(copts);
            Some(ConfigFactory(Arc::new(move || {
                reloaded_config(Some(&bundle), &copts)
            })))
        }
        (Trust::ReloadPerConnection, None, Some(ext)) => {
            let cacert = ext.cacert.clone();
            let copts = Arc::new(copts);
            // Without --cacert: the system store through rustls-native-certs, as a client
            // with no roots configured loads it.
            Some(ConfigFactory(Arc::new(move || {
                reloaded_config(cacert.as_deref(), &copts)
            })))
        }
        _ => None,
    };
    Ok(Live {
        cell,
        servers,
        addrs,
        config: built.config,
        factory,
        rounds: Vec::new(),
        server_cpu: Vec::new(),
    })
}
