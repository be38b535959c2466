//! The issuer index: trust anchors grouped by subject name, plus an index by subject key
//! identifier when the store has certificates. A chain's candidate anchors are those whose
//! subject names the issuer of one of the presented certificates — exactly the anchors
//! webpki's path building could use — found by hash lookups instead of a scan.
//!
//! Each subject group carries a ready-made `RootCertStore`, so the usual chain (one root
//! behind it) costs no allocation at verification time; several groups are merged in store
//! order, so webpki sees candidates in the order it would with the whole store.

use std::collections::HashMap;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::{CertificateDer, TrustAnchor};

use crate::der::cert_names;
use crate::trust::TrustStore;

struct Group {
    indexes: Vec<u32>,
    roots: Arc<RootCertStore>,
}

/// Anchors indexed by subject (and key identifier).
pub struct AnchorIndex {
    anchors: Arc<RootCertStore>,
    by_subject: HashMap<Box<[u8]>, Group>,
    by_key_id: HashMap<Box<[u8]>, Vec<u32>>,
    empty: Arc<RootCertStore>,
}

/// The anchors a chain may use.
#[derive(Debug, Clone)]
pub struct Candidates {
    /// The candidate anchors as a root store, in store order.
    pub roots: Arc<RootCertStore>,
    /// How many of them have a subject key identifier equal to the authority key
    /// identifier of a presented certificate (when the store has certificates); counted
    /// only by [`AnchorIndex::candidates_detailed`], 0 otherwise.
    pub by_key_id: usize,
}

impl AnchorIndex {
    /// Indexes a store.
    pub fn new(store: &TrustStore) -> Self {
        let anchors = store.root_cert_store();
        let mut subjects: HashMap<Box<[u8]>, Vec<u32>> = HashMap::new();
        for (i, a) in anchors.roots.iter().enumerate() {
            subjects
                .entry(Box::from(a.subject.as_ref()))
                .or_default()
                .push(i as u32);
        }
        let by_subject = subjects
            .into_iter()
            .map(|(subject, indexes)| {
                let roots = Arc::new(RootCertStore {
                    roots: indexes
                        .iter()
                        .map(|&i| anchors.roots[i as usize].clone())
                        .collect(),
                });
                (subject, Group { indexes, roots })
            })
            .collect();
        let mut by_key_id: HashMap<Box<[u8]>, Vec<u32>> = HashMap::new();
        for (i, der) in store.certs().iter().enumerate() {
            if let Some(ski) = cert_names(der).and_then(|n| n.subject_key_id) {
                by_key_id.entry(Box::from(ski)).or_default().push(i as u32);
            }
        }
        AnchorIndex {
            anchors,
            by_subject,
            by_key_id,
            empty: Arc::new(RootCertStore::empty()),
        }
    }

    /// Anchors in the index.
    pub fn len(&self) -> usize {
        self.anchors.roots.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.anchors.roots.is_empty()
    }

    /// All anchors, as one store (what rustls's default verifier scans).
    pub fn all(&self) -> Arc<RootCertStore> {
        Arc::clone(&self.anchors)
    }

    /// The candidate anchors for a presented chain (the verification hot path).
    pub fn candidates(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
    ) -> Candidates {
        self.find(end_entity, intermediates, false)
    }

    /// Like [`AnchorIndex::candidates`], also counting candidates matched by key
    /// identifier (for reports).
    pub fn candidates_detailed(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
    ) -> Candidates {
        self.find(end_entity, intermediates, true)
    }

    fn find(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        count_key_ids: bool,
    ) -> Candidates {
        let mut groups: Vec<&Group> = Vec::new();
        let mut key_ids = 0;
        for der in std::iter::once(end_entity).chain(intermediates) {
            let Some(names) = cert_names(der) else {
                continue;
            };
            if let Some(g) = self.by_subject.get(names.issuer)
                && !groups.iter().any(|x| std::ptr::eq(*x, g))
            {
                if count_key_ids
                    && let Some(aki) = names.authority_key_id
                    && let Some(ids) = self.by_key_id.get(aki)
                {
                    key_ids += ids.iter().filter(|i| g.indexes.contains(i)).count();
                }
                groups.push(g);
            }
        }
        let roots = match groups.as_slice() {
            [] => Arc::clone(&self.empty),
            [one] => Arc::clone(&one.roots),
            many => {
                let mut idx: Vec<u32> = many
                    .iter()
                    .flat_map(|g| g.indexes.iter().copied())
                    .collect();
                idx.sort_unstable();
                idx.dedup();
                Arc::new(RootCertStore {
                    roots: idx
                        .iter()
                        .map(|&i| self.anchors.roots[i as usize].clone())
                        .collect::<Vec<TrustAnchor<'static>>>(),
                })
            }
        };
        Candidates {
            roots,
            by_key_id: key_ids,
        }
    }
}
