//! Key shares off the hot path: up to N fresh ephemeral key shares per Diffie-Hellman
//! group, generated ahead by a background thread. Each share is handed out exactly once
//! (popped from the pool), so forward secrecy is untouched; an empty pool falls back to
//! generating on the spot. KEM groups (ML-KEM hybrids) are not pooled: the server's share
//! depends on the client's.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::crypto::{ActiveKeyExchange, CompletedKeyExchange, CryptoProvider, SupportedKxGroup};
use rustls::{Error, NamedGroup, ProtocolVersion};

struct Pool {
    shares: Mutex<VecDeque<Box<dyn ActiveKeyExchange>>>,
    /// When a share was last taken, in ms since `epoch`.
    last_take_ms: AtomicU64,
    epoch: std::time::Instant,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// How often pooled shares were used, and how often the pool was empty.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct PoolStats {
    /// Handshakes that took a pre-generated share.
    pub hits: u64,
    /// Handshakes that generated one on the spot.
    pub misses: u64,
}

struct PooledGroup {
    inner: &'static dyn SupportedKxGroup,
    pool: Arc<Pool>,
}

impl fmt::Debug for PooledGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PooledGroup({:?})", self.inner.name())
    }
}

impl PooledGroup {
    fn take(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
        let popped = self.pool.shares.lock().ok().and_then(|mut q| q.pop_front());
        self.pool.last_take_ms.store(
            self.pool.epoch.elapsed().as_millis() as u64,
            Ordering::Relaxed,
        );
        match popped {
            Some(kx) => {
                self.pool.hits.fetch_add(1, Ordering::Relaxed);
                Ok(kx)
            }
            None => {
                self.pool.misses.fetch_add(1, Ordering::Relaxed);
                self.inner.start()
            }
        }
    }
}

impl SupportedKxGroup for PooledGroup {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
        self.take()
    }

    fn start_and_complete(&self, peer_pub_key: &[u8]) -> Result<CompletedKeyExchange, Error> {
        let kx = self.take()?;
        Ok(CompletedKeyExchange {
            group: kx.group(),
            pub_key: kx.pub_key().to_vec(),
            secret: kx.complete(peer_pub_key)?,
        })
    }

    fn name(&self) -> NamedGroup {
        self.inner.name()
    }

    fn fips(&self) -> bool {
        self.inner.fips()
    }

    fn usable_for_version(&self, version: ProtocolVersion) -> bool {
        self.inner.usable_for_version(version)
    }
}

/// Handle on the pools of a provider: statistics, and the refill thread's lifetime.
pub struct KxPools {
    pools: Vec<(NamedGroup, Arc<Pool>)>,
}

impl KxPools {
    /// Hits and misses, all groups together.
    pub fn stats(&self) -> PoolStats {
        let mut s = PoolStats::default();
        for (_, p) in &self.pools {
            s.hits += p.hits.load(Ordering::Relaxed);
            s.misses += p.misses.load(Ordering::Relaxed);
        }
        s
    }

    /// Shares ready now, per group.
    pub fn ready(&self) -> Vec<(NamedGroup, usize)> {
        self.pools
            .iter()
            .map(|(g, p)| (*g, p.shares.lock().map(|q| q.len()).unwrap_or(0)))
            .collect()
    }
}

fn poolable(g: NamedGroup) -> bool {
    matches!(
        g,
        NamedGroup::X25519
            | NamedGroup::X448
            | NamedGroup::secp256r1
            | NamedGroup::secp384r1
            | NamedGroup::secp521r1
    )
}

/// Wraps `provider`'s Diffie-Hellman groups with pools of `size` shares each and starts
/// the refill thread. The wrapped groups live for the rest of the process.
pub fn install(provider: &mut CryptoProvider, size: usize) -> KxPools {
    let mut pools = Vec::new();
    let mut groups: Vec<&'static dyn SupportedKxGroup> =
        Vec::with_capacity(provider.kx_groups.len());
    let mut refill: Vec<(&'static dyn SupportedKxGroup, Arc<Pool>)> = Vec::new();
    for &g in &provider.kx_groups {
        if !poolable(g.name()) || size == 0 {
            groups.push(g);
            continue;
        }
        let pool = Arc::new(Pool {
            shares: Mutex::new(VecDeque::with_capacity(size)),
            last_take_ms: AtomicU64::new(0),
            epoch: std::time::Instant::now(),
            capacity: size,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        });
        let wrapped: &'static PooledGroup = Box::leak(Box::new(PooledGroup {
            inner: g,
            pool: Arc::clone(&pool),
        }));
        groups.push(wrapped);
        refill.push((g, Arc::clone(&pool)));
        pools.push((g.name(), pool));
    }
    provider.kx_groups = groups;
    if !refill.is_empty() {
        let spawned = std::thread::Builder::new()
            .name("tlsperf-kx-pool".into())
            .spawn(move || refill_loop(refill));
        if let Err(e) = spawned {
            tracing::warn!(
                "key-share pool thread not started ({e}); shares are generated per handshake"
            );
        }
    }
    KxPools { pools }
}

/// Refills while the server is quiet (no share taken for a few milliseconds), so that a
/// burst finds the pool full and is not slowed by refills competing for the CPU; a pool
/// below a tenth of its size is refilled regardless.
fn refill_loop(pools: Vec<(&'static dyn SupportedKxGroup, Arc<Pool>)>) {
    const QUIET_MS: u64 = 5;
    loop {
        let mut made = false;
        for (group, pool) in &pools {
            let len = pool.shares.lock().map(|q| q.len()).unwrap_or(pool.capacity);
            let now = pool.epoch.elapsed().as_millis() as u64;
            let quiet = now.saturating_sub(pool.last_take_ms.load(Ordering::Relaxed)) >= QUIET_MS;
            let need = len < pool.capacity && (quiet || len < pool.capacity / 10);
            if need && let Ok(kx) = group.start() {
                if let Ok(mut q) = pool.shares.lock() {
                    q.push_back(kx);
                }
                made = true;
            }
        }
        if !made {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::Provider;

    #[test]
    fn shares_are_used_once_and_refilled() {
        let mut p = (*Provider::AwsLcRs.crypto_provider()).clone();
        let pools = install(&mut p, 4);
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            pools.ready().iter().all(|(_, n)| *n == 4),
            "{:?}",
            pools.ready()
        );
        let g = p
            .kx_groups
            .iter()
            .find(|g| g.name() == NamedGroup::X25519)
            .unwrap();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..20 {
            let kx = g.start().unwrap();
            assert!(
                seen.insert(kx.pub_key().to_vec()),
                "a key share was handed out twice"
            );
        }
        let s = pools.stats();
        assert_eq!(s.hits + s.misses, 20);
        assert!(s.hits >= 4);
        // A completed exchange agrees with the peer's.
        let peer = g.start().unwrap();
        let peer_pub = peer.pub_key().to_vec();
        let done = g.start_and_complete(&peer_pub).unwrap();
        let theirs = peer.complete(&done.pub_key).unwrap();
        assert_eq!(done.secret.secret_bytes(), theirs.secret_bytes());
        // KEM hybrids are left alone.
        assert!(
            p.kx_groups
                .iter()
                .any(|g| g.name() == NamedGroup::X25519MLKEM768)
        );
    }
}
