//! Two `tlsperf crypto` results compared row by row: `tlsperf compare A.json B.json`.
//!
//! - The kind of a result comes from its `schema` field (`tlsperf-crypto-sign/1`,
//!   `-kx/1`, `-handshake/1`, `-limit/1`); both files must be of the same kind.
//! - Rows are matched by identity, never by position:
//!   - sign: algorithm, implementation and operation;
//!   - kx: group, provider and side;
//!   - handshake: provider, version, certificate and kind, one row per side (client and
//!     server are compared apart);
//!   - limit: each operation by name and side, and each limit by handshake kind and side,
//!     on the rounds of its measured handshake rate (`measured_rounds_ns`). A limit file
//!     written before that field existed has only medians: its limits get the ratio of
//!     the medians and no test.
//! - Each matched row: Welch's t-test on the rounds (ns/op, lower is better) after
//!   Tukey's 1.5×IQR filter (unless turned off), through [`crate::stats::compare()`]. A side
//!   with fewer than two rounds is reported as too few rounds, not as an error.
//! - Rows found in one file only are listed; no row in common at all is an error.
//! - Settings that make figures less comparable (seconds, rounds, the message length of
//!   `sign`, what each handshake negotiated, the provider, chain, group and version of
//!   `limit`) become warnings when they differ.
//!
//! The engine never prints: [`compare_files`] returns a serializable
//! [`CryptoComparison`]; `crate::report::crypto::compare` renders it as text.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize, Serializer};

use crate::error::{Classify, ErrorClass, io_input_class};
use crate::stats::{
    CompareOptions, Direction, IqrFilter, Samples, StatsError, Summary, WelchTest, compare,
};

/// Every `tlsperf crypto` schema starts with this.
pub const SCHEMA_PREFIX: &str = "tlsperf-crypto-";

/// The schema of a [`CryptoComparison`].
pub const COMPARE_SCHEMA: &str = "tlsperf-crypto-compare/1";

/// Largest result file read (64 MiB): a guard against pointing at the wrong file.
pub const MAX_RESULT_FILE: u64 = 64 << 20;

/// The kind of a `tlsperf crypto` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CryptoKind {
    /// `crypto sign`.
    Sign,
    /// `crypto kx`.
    Kx,
    /// `crypto handshake`.
    Handshake,
    /// `crypto limit`.
    Limit,
}

impl CryptoKind {
    /// Every kind.
    pub const ALL: [CryptoKind; 4] = [
        CryptoKind::Sign,
        CryptoKind::Kx,
        CryptoKind::Handshake,
        CryptoKind::Limit,
    ];

    /// The schema this version reads.
    pub fn schema(self) -> &'static str {
        match self {
            CryptoKind::Sign => "tlsperf-crypto-sign/1",
            CryptoKind::Kx => "tlsperf-crypto-kx/1",
            CryptoKind::Handshake => "tlsperf-crypto-handshake/1",
            CryptoKind::Limit => "tlsperf-crypto-limit/2",
        }
    }

    /// Older schemas still read: `tlsperf-crypto-limit/1` has the same operations and
    /// measured rates (no `in_handshake`, and a `crypto_ns` of another meaning, neither
    /// of which is compared).
    const OLDER: [(&'static str, CryptoKind); 1] = [("tlsperf-crypto-limit/1", CryptoKind::Limit)];

    /// The kind whose schema (current or older, see [`Self::OLDER`]) is exactly `schema`.
    pub fn from_schema(schema: &str) -> Option<CryptoKind> {
        CryptoKind::ALL
            .into_iter()
            .find(|k| k.schema() == schema)
            .or_else(|| {
                Self::OLDER
                    .iter()
                    .find(|(s, _)| *s == schema)
                    .map(|(_, k)| *k)
            })
    }

    /// `sign`, `kx`, `handshake` or `limit`.
    pub fn name(self) -> &'static str {
        match self {
            CryptoKind::Sign => "sign",
            CryptoKind::Kx => "kx",
            CryptoKind::Handshake => "handshake",
            CryptoKind::Limit => "limit",
        }
    }
}

impl fmt::Display for CryptoKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why two crypto results could not be compared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoCompareError {
    /// The file could not be read.
    #[error("cannot read {}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is too large to be a crypto result.
    #[error("{}: {size} bytes is too large for a tlsperf crypto result (limit {MAX_RESULT_FILE} bytes)", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// The file is not valid JSON of its schema.
    #[error("{}:{line}:{column}: not a valid {schema} result: {reason}", .path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The schema it claims (or what was expected).
        schema: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Why.
        reason: String,
    },
    /// A `tlsperf-crypto-*` schema this version cannot read.
    #[error(
        "{}: schema '{schema}' is not a tlsperf crypto result this version can compare (it reads {})",
        .path.display(),
        known_schemas()
    )]
    UnknownSchema {
        /// The file.
        path: PathBuf,
        /// Its schema.
        schema: String,
    },
    /// A crypto result against something else (a sample file, a load or lab result).
    #[error(
        "{} is a tlsperf crypto result ({crypto_schema}) but {} is {}: compare two crypto results of the same kind",
        .crypto.display(),
        .other.display(),
        describe_other(.other_schema.as_deref())
    )]
    NotCrypto {
        /// The crypto result.
        crypto: PathBuf,
        /// Its schema.
        crypto_schema: String,
        /// The other file.
        other: PathBuf,
        /// The other file's schema, when it is JSON with one.
        other_schema: Option<String>,
    },
    /// Neither file is a crypto result.
    #[error("neither {} nor {} is a tlsperf crypto result", .a.display(), .b.display())]
    NeitherCrypto {
        /// First file.
        a: PathBuf,
        /// Second file.
        b: PathBuf,
    },
    /// Two crypto results of different kinds.
    #[error(
        "{} ({a_schema}) and {} ({b_schema}) are different kinds of tlsperf crypto result: compare sign with sign, kx with kx, handshake with handshake, limit with limit",
        .a.display(),
        .b.display()
    )]
    KindMismatch {
        /// First file.
        a: PathBuf,
        /// Its schema.
        a_schema: String,
        /// Second file.
        b: PathBuf,
        /// Its schema.
        b_schema: String,
    },
    /// No row of one result is in the other.
    #[error("{} and {} have nothing in common: no {kind} row is in both", .a.display(), .b.display())]
    NothingInCommon {
        /// First file.
        a: PathBuf,
        /// Second file.
        b: PathBuf,
        /// Their kind.
        kind: CryptoKind,
    },
    /// An option is out of range (`--alpha`).
    #[error(transparent)]
    Stats(#[from] StatsError),
}

impl Classify for CryptoCompareError {
    fn class(&self) -> ErrorClass {
        match self {
            CryptoCompareError::Io { source, .. } => io_input_class(source),
            _ => ErrorClass::Input,
        }
    }
}

fn known_schemas() -> String {
    CryptoKind::ALL
        .iter()
        .map(|k| k.schema())
        .chain(CryptoKind::OLDER.iter().map(|(s, _)| *s))
        .collect::<Vec<_>>()
        .join(", ")
}

fn describe_other(schema: Option<&str>) -> String {
    match schema {
        Some(s) => format!("a '{s}' document"),
        None => "not (a sample file, or JSON without a schema)".into(),
    }
}

/// How to compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CryptoCompareOptions {
    /// Significance level, strictly between 0 and 1.
    pub alpha: f64,
    /// Tukey's 1.5×IQR filter on each side's rounds before the test.
    pub filter: bool,
}

impl Default for CryptoCompareOptions {
    fn default() -> Self {
        CryptoCompareOptions {
            alpha: 0.05,
            filter: true,
        }
    }
}

/// True when `text` is JSON whose schema names a `tlsperf crypto` document (of any
/// version: [`compare_files`] then says which it cannot read).
pub fn is_crypto_result(text: &[u8]) -> bool {
    crate::doc::sniff(text).is_some_and(|s| s.starts_with(SCHEMA_PREFIX))
}

// ---------------------------------------------------------------------------------------
// What is read: only the fields the comparison needs; identities stay strings so that a
// result naming an algorithm this version does not know still compares.

/// The figures of one measured item, as written by `crypto::Measurement`.
#[derive(Debug, Clone, Deserialize)]
struct MeasurementIn {
    /// Median ns/op (null when a run had no round).
    #[serde(default)]
    ns_per_op: Option<f64>,
    /// Every round's ns/op.
    rounds_ns: Vec<f64>,
}

#[derive(Debug, Deserialize)]
struct SignIn {
    seconds: f64,
    rounds: u32,
    #[serde(default)]
    message_len: Option<u64>,
    rows: Vec<SignRowIn>,
}

#[derive(Debug, Deserialize)]
struct SignRowIn {
    alg: String,
    implementation: String,
    op: String,
    #[serde(flatten)]
    m: MeasurementIn,
}

#[derive(Debug, Deserialize)]
struct KxIn {
    seconds: f64,
    rounds: u32,
    rows: Vec<KxRowIn>,
}

#[derive(Debug, Deserialize)]
struct KxRowIn {
    group: String,
    provider: String,
    side: String,
    #[serde(flatten)]
    m: MeasurementIn,
}

#[derive(Debug, Deserialize)]
struct HandshakeIn {
    seconds: f64,
    rounds: u32,
    rows: Vec<HandshakeRowIn>,
}

#[derive(Debug, Deserialize)]
struct HandshakeRowIn {
    provider: String,
    tls: String,
    cert: String,
    kind: String,
    #[serde(default)]
    negotiated: Option<NegotiatedIn>,
    client: MeasurementIn,
    server: MeasurementIn,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct NegotiatedIn {
    #[serde(default)]
    cipher_suite: Option<String>,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    version: Option<String>,
}

impl fmt::Display for NegotiatedIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |x: &Option<String>| x.clone().unwrap_or_else(|| "-".into());
        write!(
            f,
            "{} / {} / {}",
            s(&self.version),
            s(&self.cipher_suite),
            s(&self.group)
        )
    }
}

#[derive(Debug, Deserialize)]
struct LimitIn {
    seconds: f64,
    rounds: u32,
    provider: String,
    cert: String,
    group: String,
    tls: String,
    operations: Vec<OperationIn>,
    /// Absent in `tlsperf-crypto-limit/1`.
    #[serde(default)]
    in_handshake: Vec<InHandshakeIn>,
    limits: Vec<LimitRowIn>,
}

#[derive(Debug, Deserialize)]
struct InHandshakeIn {
    kind: String,
    side: String,
    categories: Vec<CategoryIn>,
}

#[derive(Debug, Deserialize)]
struct CategoryIn {
    category: String,
    ns: f64,
    rounds_ns: Vec<f64>,
}

#[derive(Debug, Deserialize)]
struct OperationIn {
    name: String,
    side: String,
    #[serde(flatten)]
    m: MeasurementIn,
}

#[derive(Debug, Deserialize)]
struct LimitRowIn {
    kind: String,
    side: String,
    #[serde(default)]
    measured_ns: Option<f64>,
    /// Absent in files written before the field existed.
    #[serde(default)]
    measured_rounds_ns: Option<Vec<f64>>,
}

/// One parsed crypto result.
#[derive(Debug)]
enum Parsed {
    Sign(SignIn),
    Kx(KxIn),
    Handshake(HandshakeIn),
    Limit(LimitIn),
}

/// A file as read: a crypto result, or something else (with its schema, if any).
#[derive(Debug)]
enum Input {
    Crypto { schema: String, parsed: Parsed },
    Other { schema: Option<String> },
}

fn parse(path: &Path, text: &[u8]) -> Result<Input, CryptoCompareError> {
    let Some(schema) = crate::doc::sniff(text) else {
        return Ok(Input::Other { schema: None });
    };
    if !schema.starts_with(SCHEMA_PREFIX) {
        return Ok(Input::Other {
            schema: Some(schema),
        });
    }
    let Some(kind) = CryptoKind::from_schema(&schema) else {
        return Err(CryptoCompareError::UnknownSchema {
            path: path.to_path_buf(),
            schema,
        });
    };
    let json_err = |e: serde_json::Error| CryptoCompareError::Json {
        path: path.to_path_buf(),
        schema: schema.clone(),
        line: e.line(),
        column: e.column(),
        reason: e.to_string(),
    };
    let parsed = match kind {
        CryptoKind::Sign => Parsed::Sign(serde_json::from_slice(text).map_err(json_err)?),
        CryptoKind::Kx => Parsed::Kx(serde_json::from_slice(text).map_err(json_err)?),
        CryptoKind::Handshake => Parsed::Handshake(serde_json::from_slice(text).map_err(json_err)?),
        CryptoKind::Limit => Parsed::Limit(serde_json::from_slice(text).map_err(json_err)?),
    };
    Ok(Input::Crypto { schema, parsed })
}

fn read(path: &Path) -> Result<Input, CryptoCompareError> {
    let io = |source| CryptoCompareError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(io(std::io::Error::from(std::io::ErrorKind::IsADirectory)));
    }
    if meta.len() > MAX_RESULT_FILE {
        return Err(CryptoCompareError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
        });
    }
    let text = crate::files::read_input(path, crate::files::InputKind::Results).map_err(io)?;
    parse(path, &text)
}

// ---------------------------------------------------------------------------------------
// Items: what each kind contributes to the generic matching.

/// The part of a crypto result a row comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Section {
    /// `rows[]` of sign, kx and handshake results (a handshake row gives two: its sides).
    Rows,
    /// `operations[]` of a limit result.
    Operations,
    /// `in_handshake[].categories[]` of a limit result.
    InHandshake,
    /// `limits[]` of a limit result.
    Limits,
}

/// What identifies a row: named fields, in display order (serialized as a JSON object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity(pub Vec<(&'static str, String)>);

impl Identity {
    /// The values joined by spaces, e.g. `ed25519 aws-lc-rs sign`.
    pub fn label(&self) -> String {
        self.0
            .iter()
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The value of field `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Serialize for Identity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// One measured item of a file, ready to match.
#[derive(Debug, Clone)]
struct Item {
    section: Section,
    identity: Identity,
    /// The rounds (ns/op); `None` when the file has only a median.
    rounds: Option<Vec<f64>>,
    /// The median the file reports, used when there are no rounds to take it from.
    median_ns: Option<f64>,
}

fn item(section: Section, identity: Vec<(&'static str, String)>, m: &MeasurementIn) -> Item {
    Item {
        section,
        identity: Identity(identity),
        rounds: Some(m.rounds_ns.clone()),
        median_ns: m.ns_per_op,
    }
}

impl Parsed {
    fn kind(&self) -> CryptoKind {
        match self {
            Parsed::Sign(_) => CryptoKind::Sign,
            Parsed::Kx(_) => CryptoKind::Kx,
            Parsed::Handshake(_) => CryptoKind::Handshake,
            Parsed::Limit(_) => CryptoKind::Limit,
        }
    }

    fn items(&self) -> Vec<Item> {
        match self {
            Parsed::Sign(r) => r
                .rows
                .iter()
                .map(|row| {
                    item(
                        Section::Rows,
                        vec![
                            ("alg", row.alg.clone()),
                            ("implementation", row.implementation.clone()),
                            ("op", row.op.clone()),
                        ],
                        &row.m,
                    )
                })
                .collect(),
            Parsed::Kx(r) => r
                .rows
                .iter()
                .map(|row| {
                    item(
                        Section::Rows,
                        vec![
                            ("group", row.group.clone()),
                            ("provider", row.provider.clone()),
                            ("side", row.side.clone()),
                        ],
                        &row.m,
                    )
                })
                .collect(),
            Parsed::Handshake(r) => r
                .rows
                .iter()
                .flat_map(|row| {
                    [("client", &row.client), ("server", &row.server)].map(|(side, m)| {
                        item(
                            Section::Rows,
                            vec![
                                ("provider", row.provider.clone()),
                                ("tls", row.tls.clone()),
                                ("cert", row.cert.clone()),
                                ("kind", row.kind.clone()),
                                ("side", side.to_string()),
                            ],
                            m,
                        )
                    })
                })
                .collect(),
            Parsed::Limit(r) => {
                let ops = r.operations.iter().map(|o| {
                    item(
                        Section::Operations,
                        vec![("name", o.name.clone()), ("side", o.side.clone())],
                        &o.m,
                    )
                });
                let inside = r.in_handshake.iter().flat_map(|ih| {
                    ih.categories.iter().map(|c| Item {
                        section: Section::InHandshake,
                        identity: Identity(vec![
                            ("kind", ih.kind.clone()),
                            ("side", ih.side.clone()),
                            ("category", c.category.clone()),
                        ]),
                        rounds: Some(c.rounds_ns.clone()),
                        median_ns: Some(c.ns),
                    })
                });
                let limits = r.limits.iter().map(|l| Item {
                    section: Section::Limits,
                    identity: Identity(vec![("kind", l.kind.clone()), ("side", l.side.clone())]),
                    rounds: l.measured_rounds_ns.clone(),
                    median_ns: l.measured_ns,
                });
                ops.chain(inside).chain(limits).collect()
            }
        }
    }

    /// Settings that should be equal for the figures to compare well, by name.
    fn settings(&self) -> Vec<(&'static str, String)> {
        let common = |seconds: f64, rounds: u32| {
            vec![
                ("seconds", seconds.to_string()),
                ("rounds", rounds.to_string()),
            ]
        };
        match self {
            Parsed::Sign(r) => {
                let mut v = common(r.seconds, r.rounds);
                if let Some(n) = r.message_len {
                    v.push(("message_len", n.to_string()));
                }
                v
            }
            Parsed::Kx(r) => common(r.seconds, r.rounds),
            Parsed::Handshake(r) => common(r.seconds, r.rounds),
            Parsed::Limit(r) => {
                let mut v = common(r.seconds, r.rounds);
                v.extend([
                    ("provider", r.provider.clone()),
                    ("cert", r.cert.clone()),
                    ("group", r.group.clone()),
                    ("tls", r.tls.clone()),
                ]);
                v
            }
        }
    }

    /// True when the file's limits carry no rounds (written before `measured_rounds_ns`).
    fn limits_without_rounds(&self) -> bool {
        matches!(self, Parsed::Limit(r) if r.limits.iter().any(|l| l.measured_rounds_ns.is_none()))
    }
}

/// What the same handshake configuration negotiated in A and in B, where it differs.
fn negotiated_warnings(a: &HandshakeIn, b: &HandshakeIn) -> Vec<String> {
    let mut out = Vec::new();
    for ra in &a.rows {
        let Some(rb) = b.rows.iter().find(|rb| {
            rb.provider == ra.provider
                && rb.tls == ra.tls
                && rb.cert == ra.cert
                && rb.kind == ra.kind
        }) else {
            continue;
        };
        match (&ra.negotiated, &rb.negotiated) {
            (Some(na), Some(nb)) if na != nb => out.push(format!(
                "{} {} {} {}: negotiated {na} in A but {nb} in B",
                ra.provider, ra.tls, ra.cert, ra.kind
            )),
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The result.

/// One of the two files.
#[derive(Debug, Clone, Serialize)]
pub struct FileInfo {
    /// The path as given.
    pub path: String,
    /// Its schema.
    pub schema: String,
}

/// One side of a compared row.
#[derive(Debug, Clone, Serialize)]
pub struct RowSide {
    /// Rounds in the file (0 when it holds only a median).
    pub rounds: usize,
    /// Rounds the test used (after the filter); null when there was no test.
    pub used: Option<usize>,
    /// Rounds the filter dropped; null when there was no test or the filter was off.
    pub outliers_dropped: Option<usize>,
    /// Median ns/op: of the rounds the test used, else of all rounds, else the file's
    /// median; null when there is none.
    pub median_ns: Option<f64>,
    /// 1e9 / `median_ns`.
    pub ops_per_sec: Option<f64>,
}

/// How a row came out, B against A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// B takes significantly less time per operation.
    Faster,
    /// B takes significantly more time per operation.
    Slower,
    /// p ≥ alpha.
    NoDifference,
    /// A side has fewer than two rounds (Welch needs two per side).
    TooFewRounds,
    /// A side has a median but no rounds (a limit file without `measured_rounds_ns`).
    MediansOnly,
    /// The test cannot be computed (both sides constant).
    Untestable,
}

/// One row matched in both files.
#[derive(Debug, Clone, Serialize)]
pub struct RowComparison {
    /// Where the row comes from.
    pub section: Section,
    /// The identity's values joined by spaces.
    pub label: String,
    /// What identifies the row.
    pub identity: Identity,
    /// Baseline.
    pub a: RowSide,
    /// Candidate.
    pub b: RowSide,
    /// ops/s of B ÷ ops/s of A (above 1: B is faster); null without both medians.
    pub ratio: Option<f64>,
    /// Welch's two-sided p-value; null without a test.
    pub p: Option<f64>,
    /// Welch's test on the rounds, ns/op (`diff` is mean B − mean A); null without one.
    pub welch: Option<WelchTest>,
    /// Whether p < alpha.
    pub significant: bool,
    /// How the row came out.
    pub outcome: Outcome,
    /// One human sentence.
    pub verdict: String,
}

/// A row present in one file only.
#[derive(Debug, Clone, Serialize)]
pub struct Unmatched {
    /// Where the row comes from.
    pub section: Section,
    /// The identity's values joined by spaces.
    pub label: String,
    /// What identifies the row.
    pub identity: Identity,
}

/// Two crypto results compared, B against A.
#[derive(Debug, Clone, Serialize)]
pub struct CryptoComparison {
    /// [`COMPARE_SCHEMA`].
    pub schema: &'static str,
    /// The kind of both results.
    pub kind: CryptoKind,
    /// Baseline file.
    pub a: FileInfo,
    /// Candidate file.
    pub b: FileInfo,
    /// Significance level.
    pub alpha: f64,
    /// Whether Tukey's filter ran on each side's rounds.
    pub filter: bool,
    /// Rows in both files, in A's order.
    pub rows: Vec<RowComparison>,
    /// Rows only A has.
    pub only_in_a: Vec<Unmatched>,
    /// Rows only B has.
    pub only_in_b: Vec<Unmatched>,
    /// Differences in settings, and anything else that makes rows less comparable.
    pub warnings: Vec<String>,
}

impl CryptoComparison {
    /// How many rows came out `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.rows.iter().filter(|r| r.outcome == outcome).count()
    }
}

/// Reads two files and compares them (B against A).
pub fn compare_files(
    a: &Path,
    b: &Path,
    opts: &CryptoCompareOptions,
) -> Result<CryptoComparison, CryptoCompareError> {
    check_alpha(opts.alpha)?;
    let ia = read(a)?;
    let ib = read(b)?;
    compare_inputs((a, ia), (b, ib), opts)
}

/// [`compare_files`] on documents already read ([`crate::doc::Input`]): each file is read
/// once, so a pipe works.
pub fn compare_documents(
    a: &crate::doc::Input,
    b: &crate::doc::Input,
    opts: &CryptoCompareOptions,
) -> Result<CryptoComparison, CryptoCompareError> {
    check_alpha(opts.alpha)?;
    let ia = parse(&a.path, &a.bytes)?;
    let ib = parse(&b.path, &b.bytes)?;
    compare_inputs((&a.path, ia), (&b.path, ib), opts)
}

fn check_alpha(alpha: f64) -> Result<(), StatsError> {
    if alpha > 0.0 && alpha < 1.0 {
        Ok(())
    } else {
        Err(StatsError::BadParam {
            name: "--alpha",
            reason: format!("{alpha} is not strictly between 0 and 1"),
        })
    }
}

fn compare_inputs(
    (pa, ia): (&Path, Input),
    (pb, ib): (&Path, Input),
    opts: &CryptoCompareOptions,
) -> Result<CryptoComparison, CryptoCompareError> {
    check_alpha(opts.alpha)?;
    let ((sa, a), (sb, b)) = match (ia, ib) {
        (
            Input::Crypto {
                schema: sa,
                parsed: a,
            },
            Input::Crypto {
                schema: sb,
                parsed: b,
            },
        ) => ((sa, a), (sb, b)),
        (Input::Crypto { schema, .. }, Input::Other { schema: other }) => {
            return Err(CryptoCompareError::NotCrypto {
                crypto: pa.to_path_buf(),
                crypto_schema: schema,
                other: pb.to_path_buf(),
                other_schema: other,
            });
        }
        (Input::Other { schema: other }, Input::Crypto { schema, .. }) => {
            return Err(CryptoCompareError::NotCrypto {
                crypto: pb.to_path_buf(),
                crypto_schema: schema,
                other: pa.to_path_buf(),
                other_schema: other,
            });
        }
        (Input::Other { .. }, Input::Other { .. }) => {
            return Err(CryptoCompareError::NeitherCrypto {
                a: pa.to_path_buf(),
                b: pb.to_path_buf(),
            });
        }
    };
    if a.kind() != b.kind() {
        return Err(CryptoCompareError::KindMismatch {
            a: pa.to_path_buf(),
            a_schema: sa,
            b: pb.to_path_buf(),
            b_schema: sb,
        });
    }
    let kind = a.kind();
    let (items_a, items_b) = (a.items(), b.items());
    let (pairs, only_a, only_b) = match_items(&items_a, &items_b);
    if pairs.is_empty() {
        return Err(CryptoCompareError::NothingInCommon {
            a: pa.to_path_buf(),
            b: pb.to_path_buf(),
            kind,
        });
    }
    let mut warnings = setting_warnings(&a.settings(), &b.settings());
    if let (Parsed::Handshake(ha), Parsed::Handshake(hb)) = (&a, &b) {
        warnings.extend(negotiated_warnings(ha, hb));
    }
    for (name, p) in [("A", &a), ("B", &b)] {
        if p.limits_without_rounds() {
            warnings.push(format!(
                "{name} has no rounds of its measured handshake rates (written before \
                 limits[].measured_rounds_ns): its limits are compared by their medians only"
            ));
        }
    }
    let unmatched = |items: &[Item], idx: Vec<usize>| {
        idx.into_iter()
            .map(|i| Unmatched {
                section: items[i].section,
                label: items[i].identity.label(),
                identity: items[i].identity.clone(),
            })
            .collect()
    };
    Ok(CryptoComparison {
        schema: COMPARE_SCHEMA,
        kind,
        a: FileInfo {
            path: pa.display().to_string(),
            schema: sa,
        },
        b: FileInfo {
            path: pb.display().to_string(),
            schema: sb,
        },
        alpha: opts.alpha,
        filter: opts.filter,
        rows: pairs
            .into_iter()
            .map(|(i, j)| compare_row(&items_a[i], &items_b[j], opts))
            .collect(),
        only_in_a: unmatched(&items_a, only_a),
        only_in_b: unmatched(&items_b, only_b),
        warnings,
    })
}

/// Pairs every item of A with the first unpaired item of B of the same section and
/// identity. Returns the pairs (in A's order) and the indices left over in A and in B.
fn match_items(a: &[Item], b: &[Item]) -> (Vec<(usize, usize)>, Vec<usize>, Vec<usize>) {
    let mut used = vec![false; b.len()];
    let mut pairs = Vec::new();
    let mut only_a = Vec::new();
    for (i, ia) in a.iter().enumerate() {
        let found = b
            .iter()
            .enumerate()
            .position(|(j, ib)| !used[j] && ib.section == ia.section && ib.identity == ia.identity);
        match found {
            Some(j) => {
                used[j] = true;
                pairs.push((i, j));
            }
            None => only_a.push(i),
        }
    }
    let only_b = (0..b.len()).filter(|&j| !used[j]).collect();
    (pairs, only_a, only_b)
}

fn setting_warnings(a: &[(&'static str, String)], b: &[(&'static str, String)]) -> Vec<String> {
    a.iter()
        .filter_map(|(name, va)| {
            let vb = b.iter().find(|(n, _)| n == name).map(|(_, v)| v)?;
            (va != vb).then(|| format!("{name} differs: A {va}, B {vb}"))
        })
        .collect()
}

/// The median of `values` (all of them, or those Tukey's filter keeps).
fn median(values: &[f64]) -> Option<f64> {
    Summary::of(values).ok().map(|s| s.median)
}

fn side_of(item: &Item, filter: bool) -> RowSide {
    let rounds = item.rounds.as_deref().unwrap_or(&[]);
    let median_ns = if rounds.is_empty() {
        item.median_ns
    } else if filter {
        median(&IqrFilter::apply(rounds).kept)
    } else {
        median(rounds)
    };
    RowSide {
        rounds: rounds.len(),
        used: None,
        outliers_dropped: None,
        median_ns,
        ops_per_sec: per_sec(median_ns),
    }
}

fn per_sec(ns: Option<f64>) -> Option<f64> {
    ns.filter(|n| *n > 0.0 && n.is_finite()).map(|n| 1e9 / n)
}

fn ratio(a: &RowSide, b: &RowSide) -> Option<f64> {
    Some(b.ops_per_sec? / a.ops_per_sec?)
}

fn compare_row(a: &Item, b: &Item, opts: &CryptoCompareOptions) -> RowComparison {
    let label = a.identity.label();
    let mut side_a = side_of(a, opts.filter);
    let mut side_b = side_of(b, opts.filter);
    let row = |side_a: RowSide,
               side_b: RowSide,
               welch: Option<WelchTest>,
               outcome: Outcome,
               verdict: String| RowComparison {
        section: a.section,
        label: label.clone(),
        identity: a.identity.clone(),
        ratio: ratio(&side_a, &side_b),
        a: side_a,
        b: side_b,
        p: welch.map(|w| w.p),
        welch,
        significant: matches!(outcome, Outcome::Faster | Outcome::Slower),
        outcome,
        verdict,
    };
    let (Some(ra), Some(rb)) = (&a.rounds, &b.rounds) else {
        let which = match (&a.rounds, &b.rounds) {
            (None, None) => "A and B have",
            (None, _) => "A has",
            _ => "B has",
        };
        let verdict = format!("medians only: {which} no rounds to test");
        return row(side_a, side_b, None, Outcome::MediansOnly, verdict);
    };
    let too_few = |na: usize, nb: usize| {
        format!("too few rounds to test (A {na}, B {nb}; Welch needs 2 per side)")
    };
    if ra.len() < 2 || rb.len() < 2 {
        let verdict = too_few(ra.len(), rb.len());
        return row(side_a, side_b, None, Outcome::TooFewRounds, verdict);
    }
    let samples = |name: &str, v: &[f64]| Samples {
        source: format!("{name} {label}"),
        values: v.to_vec(),
    };
    let copts = CompareOptions {
        alpha: opts.alpha,
        filter: opts.filter,
        direction: Direction::LowerIsBetter,
    };
    match compare(&samples("A", ra), &samples("B", rb), &copts) {
        Ok(c) => {
            for (side, s) in [(&mut side_a, &c.a), (&mut side_b, &c.b)] {
                side.used = Some(s.summary.n);
                side.outliers_dropped = s.filter.as_ref().map(|_| s.outliers_dropped);
                side.median_ns = Some(s.summary.median);
                side.ops_per_sec = per_sec(side.median_ns);
            }
            let outcome = match (c.significant, c.welch.diff < 0.0) {
                (false, _) => Outcome::NoDifference,
                (true, true) => Outcome::Faster,
                (true, false) => Outcome::Slower,
            };
            row(side_a, side_b, Some(c.welch), outcome, c.verdict)
        }
        Err(StatsError::TooFew { .. }) => {
            let verdict = too_few(ra.len(), rb.len());
            row(side_a, side_b, None, Outcome::TooFewRounds, verdict)
        }
        Err(e) => row(
            side_a,
            side_b,
            None,
            Outcome::Untestable,
            format!("cannot test: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign_json(rows: &[(&str, &str, &str, &[f64])]) -> String {
        sign_json_with(1.0, 5, rows)
    }

    fn sign_json_with(seconds: f64, rounds: u32, rows: &[(&str, &str, &str, &[f64])]) -> String {
        let rows: Vec<_> = rows
            .iter()
            .map(|(alg, imp, op, r)| {
                serde_json::json!({
                    "alg": alg, "implementation": imp, "op": op, "signature_len": 64,
                    "ns_per_op": r.first().copied(), "rounds_ns": r,
                })
            })
            .collect();
        serde_json::json!({
            "schema": "tlsperf-crypto-sign/1", "seconds": seconds, "rounds": rounds,
            "message_len": 130, "allocations_counted": true, "rows": rows,
        })
        .to_string()
    }

    fn run(a: &str, b: &str) -> Result<CryptoComparison, CryptoCompareError> {
        let (pa, pb) = (Path::new("a.json"), Path::new("b.json"));
        compare_inputs(
            (pa, parse(pa, a.as_bytes())?),
            (pb, parse(pb, b.as_bytes())?),
            &CryptoCompareOptions::default(),
        )
    }

    const SLOW: [f64; 5] = [1000.0, 1010.0, 990.0, 1005.0, 995.0];
    const FAST: [f64; 5] = [500.0, 505.0, 495.0, 502.0, 498.0];

    #[test]
    fn sign_rows_match_by_identity_not_position() {
        let a = sign_json(&[
            ("ed25519", "aws-lc-rs", "sign", &SLOW),
            ("ed25519", "aws-lc-rs", "verify", &FAST),
            ("ed25519", "ring", "sign", &SLOW),
        ]);
        // Reordered, one row missing, one row new.
        let b = sign_json(&[
            ("ed25519", "aws-lc-rs", "verify", &FAST),
            ("ed25519", "rustcrypto", "sign", &SLOW),
            ("ed25519", "aws-lc-rs", "sign", &FAST),
        ]);
        let c = run(&a, &b).unwrap();
        assert_eq!(c.kind, CryptoKind::Sign);
        let labels: Vec<_> = c.rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            ["ed25519 aws-lc-rs sign", "ed25519 aws-lc-rs verify"]
        );
        assert_eq!(c.rows[0].outcome, Outcome::Faster);
        assert!(c.rows[0].p.unwrap() < 0.001);
        assert!((c.rows[0].ratio.unwrap() - 2.0).abs() < 0.05);
        assert_eq!(c.rows[1].outcome, Outcome::NoDifference);
        assert_eq!(c.rows[1].p, Some(1.0));
        assert_eq!(c.only_in_a.len(), 1);
        assert_eq!(c.only_in_a[0].label, "ed25519 ring sign");
        assert_eq!(
            c.only_in_b[0].identity.get("implementation"),
            Some("rustcrypto")
        );
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        // The identity serializes as an object.
        let v = serde_json::to_value(&c.rows[0]).unwrap();
        assert_eq!(v["identity"]["alg"], "ed25519");
        assert_eq!(v["outcome"], "faster");
    }

    #[test]
    fn slower_and_swapped_direction() {
        let a = sign_json(&[("ed25519", "ring", "sign", &FAST)]);
        let b = sign_json(&[("ed25519", "ring", "sign", &SLOW)]);
        let c = run(&a, &b).unwrap();
        assert_eq!(c.rows[0].outcome, Outcome::Slower);
        assert!(c.rows[0].significant);
        assert!(c.rows[0].ratio.unwrap() < 0.6);
    }

    #[test]
    fn duplicates_pair_in_order() {
        let a = sign_json(&[
            ("ed25519", "ring", "sign", &SLOW),
            ("ed25519", "ring", "sign", &FAST),
        ]);
        let b = sign_json(&[("ed25519", "ring", "sign", &SLOW)]);
        let c = run(&a, &b).unwrap();
        assert_eq!(c.rows.len(), 1);
        assert_eq!(c.rows[0].outcome, Outcome::NoDifference);
        assert_eq!(c.only_in_a.len(), 1);
    }

    #[test]
    fn too_few_rounds_is_a_row_not_an_error() {
        let a = sign_json(&[("ed25519", "ring", "sign", &[1000.0])]);
        let b = sign_json(&[("ed25519", "ring", "sign", &SLOW)]);
        let c = run(&a, &b).unwrap();
        let r = &c.rows[0];
        assert_eq!(r.outcome, Outcome::TooFewRounds);
        assert_eq!(r.p, None);
        assert_eq!(r.a.rounds, 1);
        assert_eq!(r.a.median_ns, Some(1000.0));
        assert!(r.verdict.contains("too few rounds"), "{}", r.verdict);
        assert!(r.ratio.is_some());
    }

    #[test]
    fn constant_rounds_are_untestable() {
        let a = sign_json(&[("ed25519", "ring", "sign", &[7.0, 7.0, 7.0])]);
        let c = run(&a, &a).unwrap();
        assert_eq!(c.rows[0].outcome, Outcome::Untestable);
        assert!(c.rows[0].verdict.contains("zero variance"));
    }

    #[test]
    fn settings_that_differ_are_warnings() {
        let a = sign_json_with(1.0, 5, &[("ed25519", "ring", "sign", &SLOW)]);
        let b = sign_json_with(0.2, 4, &[("ed25519", "ring", "sign", &SLOW)]);
        let c = run(&a, &b).unwrap();
        assert_eq!(
            c.warnings,
            ["seconds differs: A 1, B 0.2", "rounds differs: A 5, B 4"]
        );
    }

    #[test]
    fn kinds_must_agree_and_versions_be_known() {
        let sign = sign_json(&[("ed25519", "ring", "sign", &SLOW)]);
        let kx = serde_json::json!({
            "schema": "tlsperf-crypto-kx/1", "seconds": 1, "rounds": 5, "rows": [],
        })
        .to_string();
        let err = run(&sign, &kx).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, CryptoCompareError::KindMismatch { .. }));
        for needle in [
            "a.json",
            "b.json",
            "tlsperf-crypto-sign/1",
            "tlsperf-crypto-kx/1",
        ] {
            assert!(msg.contains(needle), "{needle} not in {msg}");
        }
        let v2 = sign.replace("tlsperf-crypto-sign/1", "tlsperf-crypto-sign/2");
        let err = run(&v2, &sign).unwrap_err();
        assert!(
            matches!(err, CryptoCompareError::UnknownSchema { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("tlsperf-crypto-sign/2"));
        let load = r#"{"schema": "tlsperf-load/1"}"#;
        let err = run(&sign, load).unwrap_err();
        assert!(err.to_string().contains("'tlsperf-load/1'"), "{err}");
        let err = run("12\n13\n", &sign).unwrap_err();
        assert!(matches!(err, CryptoCompareError::NotCrypto { .. }));
        assert!(err.to_string().contains("sample file"), "{err}");
        assert_eq!(err.class(), ErrorClass::Input);
    }

    #[test]
    fn malformed_and_disjoint() {
        let sign = sign_json(&[("ed25519", "ring", "sign", &SLOW)]);
        let bad = r#"{"schema": "tlsperf-crypto-sign/1", "seconds": 1, "rounds": 5, "rows": [{"alg": 3}]}"#;
        let err = run(&sign, bad).unwrap_err();
        assert!(err.to_string().starts_with("b.json:1:"), "{err}");
        let other = sign_json(&[("ecdsa-p256", "ring", "sign", &SLOW)]);
        let err = run(&sign, &other).unwrap_err();
        assert!(matches!(err, CryptoCompareError::NothingInCommon { .. }));
        assert!(err.to_string().contains("nothing in common"), "{err}");
        let bad_alpha = CryptoCompareOptions {
            alpha: 0.0,
            filter: true,
        };
        let p = Path::new("a.json");
        let input = || parse(p, sign.as_bytes()).unwrap();
        assert!(compare_inputs((p, input()), (p, input()), &bad_alpha).is_err());
    }

    fn handshake_json(suite: &str, client: &[f64], server: &[f64]) -> String {
        serde_json::json!({
            "schema": "tlsperf-crypto-handshake/1", "seconds": 1, "rounds": 5,
            "allocations_counted": true,
            "rows": [{
                "provider": "aws-lc-rs", "tls": "1.3", "cert": "ecdsa-p256", "kind": "full",
                "negotiated": {"cipher_suite": suite, "group": "x25519", "version": "TLSv1_3"},
                "client": {"ns_per_op": client[0], "rounds_ns": client},
                "server": {"ns_per_op": server[0], "rounds_ns": server},
            }],
        })
        .to_string()
    }

    #[test]
    fn handshake_sides_are_two_rows_and_negotiation_is_checked() {
        let a = handshake_json("TLS13_AES_128_GCM_SHA256", &SLOW, &SLOW);
        let b = handshake_json("TLS13_AES_256_GCM_SHA384", &SLOW, &FAST);
        let c = run(&a, &b).unwrap();
        let got: Vec<_> = c
            .rows
            .iter()
            .map(|r| (r.identity.get("side").unwrap(), r.outcome))
            .collect();
        assert_eq!(
            got,
            [
                ("client", Outcome::NoDifference),
                ("server", Outcome::Faster)
            ]
        );
        assert_eq!(c.rows[0].label, "aws-lc-rs 1.3 ecdsa-p256 full client");
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert_eq!(
            c.warnings[0],
            "aws-lc-rs 1.3 ecdsa-p256 full: negotiated TLSv1_3 / TLS13_AES_128_GCM_SHA256 / \
             x25519 in A but TLSv1_3 / TLS13_AES_256_GCM_SHA384 / x25519 in B"
        );
    }

    fn limit_json(cert: &str, rounds: Option<&[f64]>) -> String {
        let mut limit = serde_json::json!({
            "kind": "full", "side": "server", "crypto_ns": 50000.0,
            "limit_per_sec": 20000.0, "measured_per_sec": 1e9 / SLOW[0],
            "measured_ns": SLOW[0], "percent_of_limit": 10.0,
        });
        if let Some(r) = rounds {
            limit["measured_rounds_ns"] = serde_json::json!(r);
        }
        serde_json::json!({
            "schema": "tlsperf-crypto-limit/1", "provider": "aws-lc-rs", "cert": cert,
            "group": "x25519", "tls": "1.3", "seconds": 1, "rounds": 5,
            "operations": [
                {"name": "kx x25519 server (start_and_complete)", "side": "server",
                 "per_full": 1, "per_resumed": 1, "ns_per_op": 1000.0, "rounds_ns": SLOW},
                {"name": format!("sign {cert} (handshake signature)"), "side": "server",
                 "per_full": 1, "per_resumed": 0, "ns_per_op": 1000.0, "rounds_ns": SLOW},
            ],
            "limits": [limit],
        })
        .to_string()
    }

    #[test]
    fn limit_operations_by_name_and_limits_by_rounds_or_medians() {
        let a = limit_json("ecdsa-p256", Some(&SLOW));
        let b = limit_json("ed25519", Some(&FAST));
        let c = run(&a, &b).unwrap();
        let got: Vec<_> = c.rows.iter().map(|r| (r.section, r.outcome)).collect();
        assert_eq!(
            got,
            [
                (Section::Operations, Outcome::NoDifference),
                (Section::Limits, Outcome::Faster)
            ]
        );
        assert_eq!(
            c.only_in_a[0].label,
            "sign ecdsa-p256 (handshake signature) server"
        );
        assert_eq!(c.warnings, ["cert differs: A ecdsa-p256, B ed25519"]);
        // A file without the rounds: the limit's medians, as a ratio, no test.
        let old = limit_json("ecdsa-p256", None);
        let c = run(&old, &b).unwrap();
        let lim = &c.rows[1];
        assert_eq!(lim.outcome, Outcome::MediansOnly);
        assert_eq!(lim.p, None);
        assert_eq!(lim.a.median_ns, Some(SLOW[0]));
        assert!((lim.ratio.unwrap() - SLOW[0] / 500.0).abs() < 1e-9);
        assert!(c.warnings.iter().any(|w| w.starts_with("A has no rounds")));
    }

    #[test]
    fn crypto_results_are_recognized_by_schema() {
        assert!(is_crypto_result(br#" {"schema": "tlsperf-crypto-kx/1"}"#));
        assert!(is_crypto_result(br#"{"schema": "tlsperf-crypto-kx/9"}"#));
        assert!(!is_crypto_result(br#"{"schema": "tlsperf-load/1"}"#));
        assert!(!is_crypto_result(b"1\n2\n"));
    }
}
