//! `tlsperf compare A B` on any two inputs of one kind: two results of the same command
//! (load, lab, capacity, each `tlsperf crypto` command, observe) or two sample files. Each input is told by
//! its `schema` ([`crate::doc::sniff`]), read through the document layer, turned into
//! rows by its kind ([`Comparable`]) and compared by the one engine,
//! [`crate::stats::rows::compare_rows`]. Every kind gives the same document,
//! [`CompareDocument`] (`tlsperf-compare/1`).
//!
//! A new result kind joins with one `impl Comparable` (and [`crate::doc::Document`]) and
//! one line in [`kinds`].

use std::path::PathBuf;

use serde::Serialize;

use crate::crypto::in_memory::HandshakeReport;
use crate::crypto::kx::KxReport;
use crate::crypto::limit::LimitReport;
use crate::crypto::sign::SignReport;
use crate::doc::{DocError, Document, Head, Input};
use crate::error::{Classify, ErrorClass};
use crate::lab::LabResult;
use crate::load::LoadResult;
use crate::stats::compare::{CompareOptions, Direction};
use crate::stats::rows::{
    Comparable, Identity, Row, RowOptions, RowSet, RowsCompared, Section, check_alpha, compare_rows,
};
use crate::stats::{SampleError, Samples, StatsError};

/// The schema of a [`CompareDocument`].
pub const SCHEMA: &str = "tlsperf-compare/1";

/// A kind of document `compare` reads.
#[derive(Debug, Clone, Copy)]
pub struct DocKind {
    /// Its short name in [`CompareDocument::kind`] ([`Comparable::KIND`]).
    pub name: &'static str,
    /// What it is, in words ([`Document::NAME`]).
    pub what: &'static str,
    /// The schema it is written with ([`Document::SCHEMA`]).
    pub schema: &'static str,
    /// Older schemas it still reads ([`Document::READS`]).
    pub older: &'static [&'static str],
    /// Reads one and gives its rows.
    pub rows: fn(&Input) -> Result<RowSet, DocError>,
}

fn kind<T: Document + Comparable>() -> DocKind {
    DocKind {
        name: T::KIND,
        what: T::NAME,
        schema: T::SCHEMA,
        older: T::READS,
        rows: |input| {
            let set = input.parse::<T>()?.row_set();
            set.check().map_err(|reason| DocError::Invalid {
                path: input.path.clone(),
                what: T::NAME,
                reason,
            })?;
            Ok(set)
        },
    }
}

impl DocKind {
    /// True when it reads documents of `schema`.
    pub fn reads(&self, schema: &str) -> bool {
        schema == self.schema || self.older.contains(&schema)
    }
}

/// Every document kind `compare` reads: one line each.
pub fn kinds() -> [DocKind; 8] {
    [
        kind::<crate::capacity::CapacityResult>(),
        kind::<LoadResult>(),
        kind::<LabResult>(),
        kind::<SignReport>(),
        kind::<KxReport>(),
        kind::<HandshakeReport>(),
        kind::<LimitReport>(),
        kind::<crate::observe::Observation>(),
    ]
}

/// The heading of a kind's comparison: `tlsperf crypto sign result`, or `sample file`.
pub fn describe(kind: &str) -> &'static str {
    kinds()
        .into_iter()
        .find(|k| k.name == kind)
        .map_or(SAMPLES_WHAT, |k| k.what)
}

const SAMPLES: &str = "samples";
const SAMPLES_WHAT: &str = "sample file";

/// How to compare.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Significance level, strictly between 0 and 1.
    pub alpha: f64,
    /// Tukey's 1.5×IQR filter on each side before the test.
    pub filter: bool,
    /// Sample files are rates (higher is better). Results know the direction of each of
    /// their rows: refused with them.
    pub higher_is_better: bool,
}

/// One of the two inputs.
#[derive(Debug, Clone, Serialize)]
pub struct FileInfo {
    /// The path as given.
    pub path: String,
    /// Its schema; null for a sample file.
    pub schema: Option<String>,
}

/// Two inputs compared, B against A: the `compare --json` document of every kind.
#[derive(Debug, Clone, Serialize)]
pub struct CompareDocument {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// `samples`, or the kind of both results (`load`, `lab`, `sign`, `kx`, `handshake`,
    /// `limit`, `capacity`, `observe`).
    pub kind: &'static str,
    /// Baseline.
    pub a: FileInfo,
    /// Candidate.
    pub b: FileInfo,
    /// Significance level.
    pub alpha: f64,
    /// Whether Tukey's filter ran on each side.
    pub filter: bool,
    /// Sections, rows, rows in one input only, warnings.
    #[serde(flatten)]
    pub compared: RowsCompared,
}

/// Why two inputs could not be compared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompareError {
    /// A document could not be read.
    #[error(transparent)]
    Doc(#[from] DocError),
    /// A sample file could not be used.
    #[error(transparent)]
    Samples(#[from] SampleError),
    /// Two capacity results without a confirmed capacity each, or searched under
    /// different objectives.
    #[error(transparent)]
    Capacity(#[from] crate::capacity::compare::CompareError),
    /// A statistic could not be computed, or `--alpha` is out of range.
    #[error(transparent)]
    Stats(#[from] StatsError),
    /// A document of a schema no kind reads.
    #[error(
        "{}: schema '{schema}' is not a result this version compares (it reads {})",
        .path.display(),
        known_schemas()
    )]
    UnknownSchema {
        /// The file.
        path: PathBuf,
        /// Its schema.
        schema: String,
    },
    /// Inputs of two kinds.
    #[error(
        "{} is {a_what} but {} is {b_what}: compare two results of the same kind, or two \
         sample files",
        .a.display(),
        .b.display()
    )]
    KindMismatch {
        /// First file.
        a: PathBuf,
        /// What it is.
        a_what: String,
        /// Second file.
        b: PathBuf,
        /// What it is.
        b_what: String,
    },
    /// No row of one result is in the other.
    #[error("{} and {} have nothing in common: no row of one {what} is in the other", .a.display(), .b.display())]
    NothingInCommon {
        /// First file.
        a: PathBuf,
        /// Second file.
        b: PathBuf,
        /// What they are.
        what: &'static str,
    },
    /// `--higher-is-better` with results.
    #[error(
        "--higher-is-better applies to sample files only: tlsperf results know which \
         direction is better for each of their rows"
    )]
    DirectionOfResults,
}

impl Classify for CompareError {
    fn class(&self) -> ErrorClass {
        match self {
            CompareError::Doc(e) => e.class(),
            CompareError::Samples(e) => e.class(),
            _ => ErrorClass::Input,
        }
    }
}

fn known_schemas() -> String {
    kinds()
        .iter()
        .flat_map(|k| std::iter::once(k.schema).chain(k.older.iter().copied()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What an input is: a sample file, or a document of a known kind.
enum What {
    Samples,
    Doc(DocKind, String),
}

impl What {
    /// A JSON object is a document: one cut short or broken is reported where its JSON
    /// breaks (and one with its `schema` given twice as such), not taken for a sample
    /// file. Anything else that is not an object is a sample file.
    fn of(input: &Input) -> Result<What, CompareError> {
        let schema = match crate::doc::head(&input.bytes) {
            Ok(Head::Schema(s)) => s,
            Ok(Head::NoSchema | Head::NotAnObject) => return Ok(What::Samples),
            Err(e) => return Err(e.at(&input.path, "JSON document").into()),
        };
        match kinds().into_iter().find(|k| k.reads(&schema)) {
            Some(k) => Ok(What::Doc(k, schema)),
            None => Err(CompareError::UnknownSchema {
                path: input.path.clone(),
                schema,
            }),
        }
    }

    fn describe(&self) -> String {
        match self {
            What::Samples => "a sample file (or JSON without a schema)".into(),
            What::Doc(k, schema) => format!("a {} ({schema})", k.what),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            What::Samples => SAMPLES,
            What::Doc(k, _) => k.name,
        }
    }
}

/// Compares B against A.
pub fn compare(a: &Input, b: &Input, opts: &Options) -> Result<CompareDocument, CompareError> {
    check_alpha(opts.alpha)?;
    let (wa, wb) = (What::of(a)?, What::of(b)?);
    if wa.name() != wb.name() {
        return Err(CompareError::KindMismatch {
            a: a.path.clone(),
            a_what: wa.describe(),
            b: b.path.clone(),
            b_what: wb.describe(),
        });
    }
    let info = |i: &Input| FileInfo {
        path: i.path.display().to_string(),
        schema: i.schema(),
    };
    // Capacity results: one answer per search, no rounds; the brackets decide
    // ([`crate::capacity::compare`]).
    if wa.name() == crate::capacity::compare::KIND {
        if opts.higher_is_better {
            return Err(CompareError::DirectionOfResults);
        }
        let parse = |i: &Input| i.parse::<crate::capacity::CapacityResult>();
        return Ok(CompareDocument {
            schema: SCHEMA,
            kind: wa.name(),
            a: info(a),
            b: info(b),
            alpha: opts.alpha,
            filter: opts.filter,
            compared: crate::capacity::compare::rows(&parse(a)?, &parse(b)?)?,
        });
    }
    let (set_a, set_b) = match &wa {
        What::Doc(kind, _) => {
            if opts.higher_is_better {
                return Err(CompareError::DirectionOfResults);
            }
            ((kind.rows)(a)?, (kind.rows)(b)?)
        }
        What::Samples => sample_rows(a, b, opts)?,
    };
    let row_opts = RowOptions {
        alpha: opts.alpha,
        filter: opts.filter,
    };
    let compared = compare_rows(&set_a, &set_b, &row_opts)?;
    if compared.rows.is_empty() {
        return Err(CompareError::NothingInCommon {
            a: a.path.clone(),
            b: b.path.clone(),
            what: describe(wa.name()),
        });
    }
    Ok(CompareDocument {
        schema: SCHEMA,
        kind: wa.name(),
        a: info(a),
        b: info(b),
        alpha: opts.alpha,
        filter: opts.filter,
        compared,
    })
}

/// Two sample files: one row each. A sample that cannot be tested (fewer than two
/// values, both constant) is an input error here, as the test is all a sample file is
/// for.
fn sample_rows(a: &Input, b: &Input, opts: &Options) -> Result<(RowSet, RowSet), CompareError> {
    let samples = |i: &Input| Samples::parse(&i.path, &String::from_utf8_lossy(&i.bytes));
    let (sa, sb) = (samples(a)?, samples(b)?);
    let direction = if opts.higher_is_better {
        Direction::HigherIsBetter
    } else {
        Direction::LowerIsBetter
    };
    let copts = CompareOptions {
        alpha: opts.alpha,
        filter: opts.filter,
        direction,
    };
    crate::stats::compare(&sa, &sb, &copts)?;
    let set = |s: Samples| RowSet {
        sections: vec![Section {
            name: SAMPLES,
            title: "",
        }],
        rows: vec![Row {
            section: SAMPLES,
            identity: Identity::default(),
            unit: String::new(),
            direction,
            rounds: Some(s.values),
            median: None,
            context: None,
        }],
        ..RowSet::default()
    };
    Ok((set(sa), set(sb)))
}
