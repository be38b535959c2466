//! Result documents: every result tlsperf writes and reads back is a JSON object whose
//! `schema` field names its kind and version (`tlsperf-load/1`, `tlsperf-lab/2`,
//! `tlsperf-crypto-limit/2`, `tlsperf-compare/1`…). This module owns what all of them
//! share:
//!
//! - [`Document`]: a result type says once which schema it writes and which older ones it
//!   still reads (a new result kind joins by implementing it);
//! - [`Input`]: an input read once, bounded, pipes included;
//! - [`sniff`]: a file's kind from its `schema`, without building the rest ([`head`]:
//!   or why it has none: broken JSON, a `schema` given twice);
//! - [`read`]: a document parsed after its schema is checked, errors naming the file,
//!   line and column, then its values checked ([`Document::validate`]);
//! - [`write()`]: a document written atomically (a temporary name, then a rename), an
//!   existing file replaced only with `force`;
//! - [`DocError`]: the one error of all of these.
//!
//! This module imports no engine: each engine's module implements [`Document`] for its
//! result type.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Classify, ErrorClass, io_input_class};
use crate::files::{FileError, FileMode, InputKind};

/// A result type that is written and read as a JSON document.
pub trait Document: Serialize + DeserializeOwned {
    /// The schema this build writes, e.g. `tlsperf-load/1`.
    const SCHEMA: &'static str;
    /// Older schemas this build still reads into the same type (fields they lack take
    /// their serde defaults).
    const READS: &'static [&'static str] = &[];
    /// What it is, in words, for messages: `tlsperf load result`.
    const NAME: &'static str;

    /// True when this type reads documents of `schema` ([`Self::SCHEMA`] or one of
    /// [`Self::READS`]).
    fn reads(schema: &str) -> bool {
        schema == Self::SCHEMA || Self::READS.contains(&schema)
    }

    /// Checks what the JSON types alone cannot: values in range and consistent with each
    /// other (what the command that writes the document would have refused from its
    /// flags, or could never have measured). [`parse`] calls it after the document is
    /// built, so that every reader refuses what no run can have written. `Err` is a
    /// plain sentence that names the field, e.g. `steps[3]: completed 12 is more than
    /// the 10 attempted`. The default accepts everything.
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

/// A document (or sample file) read whole, once: so that telling its kind and parsing
/// it see the same bytes, also when it is a pipe.
#[derive(Debug, Clone)]
pub struct Input {
    /// Where it came from (as the user named it).
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl Input {
    /// Reads `path` ([`InputKind::Results`]: at most 256 MiB; a regular file or a pipe).
    pub fn read(path: &Path) -> Result<Input, DocError> {
        let bytes = crate::files::read_input(path, InputKind::Results).map_err(|source| {
            DocError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
        Ok(Input {
            path: path.to_path_buf(),
            bytes,
        })
    }

    /// The document's `schema`, if it is a JSON object with one ([`sniff`]).
    pub fn schema(&self) -> Option<String> {
        sniff(&self.bytes)
    }

    /// Parses the input as a `T` ([`parse`]).
    pub fn parse<T: Document>(&self) -> Result<T, DocError> {
        parse(&self.path, &self.bytes)
    }
}

/// The `schema` string of a JSON object, without building the rest of it; `None` for
/// anything else (sample files, other JSON, broken JSON, a `schema` that is not a
/// string or is given twice). [`head`] says why.
pub fn sniff(text: &[u8]) -> Option<String> {
    match head(text) {
        Ok(Head::Schema(s)) => Some(s),
        _ => None,
    }
}

/// What the top of an input is, as far as [`head`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// Not a JSON object: its first character is not `{` (a sample file, an array…).
    NotAnObject,
    /// A JSON object without a `schema` key, or whose `schema` is not a string.
    NoSchema,
    /// A JSON object with this `schema`.
    Schema(String),
}

/// Why [`head`] could not tell an object's schema: where its JSON breaks, or the
/// `schema` key given twice (which of the two would count is anybody's guess).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Why, in words (serde_json's own words for broken JSON).
    pub reason: String,
}

impl HeadError {
    /// As a [`DocError::Json`] naming `path` and `what` was expected.
    pub fn at(self, path: &Path, what: &'static str) -> DocError {
        DocError::Json {
            path: path.to_path_buf(),
            what,
            line: self.line,
            column: self.column,
            reason: self.reason,
        }
    }
}

/// The reason [`head`] gives for a `schema` key given twice.
const SCHEMA_TWICE: &str = "the key \"schema\" is given twice";

/// Reads the `schema` of a text that starts (after white space) with `{`, checking
/// that the whole text is JSON, without building the rest of it. Anything else is
/// [`Head::NotAnObject`].
pub fn head(text: &[u8]) -> Result<Head, HeadError> {
    head_costed(text).map(|(h, _)| h)
}

/// [`head`], and the document's [`footprint`] from the same pass (0 when it is not an
/// object).
fn head_costed(text: &[u8]) -> Result<(Head, u64), HeadError> {
    struct Top<'a>(&'a mut u64);
    impl<'de> serde::de::Visitor<'de> for Top<'_> {
        type Value = Head;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
            let mut schema: Option<serde_json::Value> = None;
            // The object itself, then each member as [`Cost`] counts one.
            *self.0 += 32;
            while let Some(k) = map.next_key::<String>()? {
                *self.0 += string_cost(k.len()) + 48;
                if k == "schema" {
                    if schema.is_some() {
                        return Err(serde::de::Error::custom(SCHEMA_TWICE));
                    }
                    let v: serde_json::Value = map.next_value()?;
                    *self.0 += match &v {
                        serde_json::Value::String(t) => string_cost(t.len()),
                        _ => 16,
                    };
                    schema = Some(v);
                } else {
                    map.next_value_seed(Cost(&mut *self.0))?;
                }
            }
            Ok(match schema {
                Some(serde_json::Value::String(s)) => Head::Schema(s),
                _ => Head::NoSchema,
            })
        }
    }
    if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Ok((Head::NotAnObject, 0));
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    let err = |e: serde_json::Error| HeadError {
        line: e.line(),
        column: e.column(),
        reason: e.to_string(),
    };
    let mut cost = 0;
    let found = serde::de::Deserializer::deserialize_map(&mut de, Top(&mut cost)).map_err(err)?;
    de.end().map_err(err)?;
    Ok((found, cost))
}

/// Reads the document at `path` ([`Input::read`], then [`parse`]).
pub fn read<T: Document>(path: &Path) -> Result<T, DocError> {
    Input::read(path)?.parse()
}

/// Parses `text` as a `T` after checking its schema, then checks its values
/// ([`Document::validate`]); `path` names it in errors. A text that is not JSON is
/// reported where its JSON breaks (as is a `schema` key given twice); JSON of another
/// schema (or none) names the schema found and those expected; one whose structure would
/// take too much memory is refused before it is built ([`footprint`]); a value out of
/// range names the field.
pub fn parse<T: Document>(path: &Path, text: &[u8]) -> Result<T, DocError> {
    let json_err = |e: serde_json::Error| DocError::Json {
        path: path.to_path_buf(),
        what: T::NAME,
        line: e.line(),
        column: e.column(),
        reason: e.to_string(),
    };
    let (head, cost) = head_costed(text).map_err(|e| e.at(path, T::NAME))?;
    let found = match head {
        Head::Schema(s) if T::reads(&s) => {
            check_footprint(path, T::NAME, text.len(), cost)?;
            let doc: T = serde_json::from_slice(text).map_err(json_err)?;
            doc.validate().map_err(|reason| DocError::Invalid {
                path: path.to_path_buf(),
                what: T::NAME,
                reason,
            })?;
            return Ok(doc);
        }
        Head::Schema(s) => Some(s),
        Head::NoSchema => None,
        // Not a JSON object: where its JSON breaks, if it does.
        Head::NotAnObject => {
            serde_json::from_slice::<serde::de::IgnoredAny>(text).map_err(json_err)?;
            None
        }
    };
    Err(DocError::Schema {
        path: path.to_path_buf(),
        what: T::NAME,
        found,
        expected: std::iter::once(T::SCHEMA)
            .chain(T::READS.iter().copied())
            .collect(),
    })
}

/// The most memory a document may take once read: [`FOOTPRINT_FACTOR`] times its size
/// plus this.
pub const FOOTPRINT_BASE: u64 = 64 << 20;

/// See [`FOOTPRINT_BASE`].
pub const FOOTPRINT_FACTOR: u64 = 4;

/// An upper estimate of the memory `text` takes once built into Rust values, in bytes,
/// from its JSON structure alone: every string 32 bytes and its length, every number,
/// `true`, `false` or `null` 16, every array or object 32, every member of an object its
/// key as a string, 48 (a map's node, half full) and its value. Many tiny strings or map
/// entries cost many times their text (`"a1234567":0,` is 13 bytes of text; 15 million
/// of them in a `BTreeMap<String, u64>` took 1.3 GB, 100 bytes each, estimated 104);
/// what tlsperf writes (histograms, numbers under named fields) is estimated at 1.7–3.3
/// times its text. `None` when the text is not JSON (the parser says where, afterwards).
pub fn footprint(text: &[u8]) -> Option<u64> {
    use serde::de::DeserializeSeed as _;
    let mut cost = 0u64;
    let mut de = serde_json::Deserializer::from_slice(text);
    Cost(&mut cost).deserialize(&mut de).ok()?;
    Some(cost)
}

/// The longest list any document may hold: a load run's intervals of 250 ms over 29 days.
/// Checked while the structure is costed, so that no list is ever built (or, under a
/// flattened field, buffered item by item) beyond it.
pub const MAX_LIST_ITEMS: usize = 10_000_000;

/// What a string of `len` bytes takes once built: its 24-byte handle and, unless empty,
/// the allocator's chunk for its bytes (16-byte granules with 8 bytes of header, 32 at
/// least, as glibc's malloc gives on 64-bit Linux). Short strings cost several times
/// their text; counting less let a list of short strings take twice its estimate.
fn string_cost(len: usize) -> u64 {
    let chunk = if len == 0 {
        0
    } else {
        ((len as u64 + 8 + 15) & !15).max(32)
    };
    24 + chunk
}

/// A JSON value's [`footprint`], added to the count it holds.
struct Cost<'a>(&'a mut u64);
impl<'de> serde::de::DeserializeSeed<'de> for Cost<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}
impl<'de> serde::de::Visitor<'de> for Cost<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        *self.0 += 16;
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        *self.0 += 16;
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        *self.0 += 16;
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        *self.0 += 16;
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        *self.0 += 16;
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        *self.0 += string_cost(v.len());
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        *self.0 += 32;
        let mut items = 0usize;
        while seq.next_element_seed(Cost(self.0))?.is_some() {
            items += 1;
            if items > MAX_LIST_ITEMS {
                return Err(serde::de::Error::custom(format!(
                    "a list of more than {MAX_LIST_ITEMS} items (tlsperf writes none so long)"
                )));
            }
        }
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        *self.0 += 32;
        while map.next_key_seed(Cost(self.0))?.is_some() {
            *self.0 += 48;
            map.next_value_seed(Cost(self.0))?;
        }
        Ok(())
    }
}

/// Refuses a document of `len` bytes whose [`footprint`] `cost` is more than
/// [`FOOTPRINT_FACTOR`] times its size plus [`FOOTPRINT_BASE`], before anything of it is
/// built.
fn check_footprint(path: &Path, what: &'static str, len: usize, cost: u64) -> Result<(), DocError> {
    let limit = FOOTPRINT_FACTOR * len as u64 + FOOTPRINT_BASE;
    if cost > limit {
        return Err(DocError::Footprint {
            path: path.to_path_buf(),
            what,
            cost,
            limit,
        });
    }
    Ok(())
}

/// Reads a JSON object into a map of at most `MAX` entries, refusing the next one before
/// it is decoded (`#[serde(deserialize_with = "crate::doc::at_most::<_, _, 32>")]`). For
/// every map of a document whose values hold histograms: a document cannot make a
/// merge or a comparison walk more rows than tlsperf ever writes.
pub fn at_most<'de, D, V, const MAX: usize>(d: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: serde::Deserialize<'de>,
{
    struct Bounded<V, const MAX: usize>(std::marker::PhantomData<V>);
    impl<'de, V: serde::Deserialize<'de>, const MAX: usize> serde::de::Visitor<'de>
        for Bounded<V, MAX>
    {
        type Value = BTreeMap<String, V>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a map of at most {MAX} entries")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(k) = map.next_key::<String>()? {
                if out.len() == MAX {
                    return Err(serde::de::Error::custom(format!(
                        "more than {MAX} entries in one map (the most tlsperf writes)"
                    )));
                }
                let v: V = map.next_value()?;
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_map(Bounded::<V, MAX>(std::marker::PhantomData))
}

/// Reads a JSON array into a list of at most `MAX` items, refusing the next one before it
/// is decoded (`#[serde(deserialize_with = "crate::doc::at_most_items::<_, _, 1000>")]`):
/// for the lists of a document whose items hold text, which cost several times their
/// JSON once built.
pub fn at_most_items<'de, D, T, const MAX: usize>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    struct Bounded<T, const MAX: usize>(std::marker::PhantomData<T>);
    impl<'de, T: serde::Deserialize<'de>, const MAX: usize> serde::de::Visitor<'de>
        for Bounded<T, MAX>
    {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a list of at most {MAX} items")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element()? {
                if out.len() == MAX {
                    return Err(serde::de::Error::custom(format!(
                        "more than {MAX} items in one list (the most tlsperf writes)"
                    )));
                }
                out.push(item);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Bounded::<T, MAX>(std::marker::PhantomData))
}

/// Writes `doc` as pretty JSON and a newline to `path`, atomically (a temporary name,
/// then a rename); an existing file only with `force`.
pub fn write<T: Serialize>(doc: &T, path: &Path, force: bool) -> Result<(), DocError> {
    // Streamed to the file: a merged document is never held twice, as a value and as text.
    let mut encode = None;
    let written = crate::files::write_atomic_with(path, FileMode::Public, force, |w| {
        match serde_json::to_writer_pretty(&mut *w, doc) {
            Ok(()) => w.write_all(b"\n"),
            Err(e) if e.is_io() => Err(e.into()),
            Err(e) => {
                let io = std::io::Error::other(e.to_string());
                encode = Some(e);
                Err(io)
            }
        }
    });
    match (written, encode) {
        (_, Some(source)) => Err(DocError::Encode {
            path: path.to_path_buf(),
            source,
        }),
        (r, None) => Ok(r?),
    }
}

/// Deserializes an `f64` that serde_json wrote as `null` (a NaN or an infinity) back to
/// NaN: for figures that are NaN when nothing was measured.
pub fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    use serde::Deserialize as _;
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A document that could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DocError {
    /// The input could not be read (missing, not a file or pipe, too large…).
    #[error("cannot read {}", .path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not JSON, or JSON that does not fit the document's schema.
    #[error("{}:{line}:{column}: not a valid {what}: {reason}", .path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The kind of document expected ([`Document::NAME`]).
        what: &'static str,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Why.
        reason: String,
    },
    /// JSON of the right schema whose values no run can have written (a count, rate,
    /// share or duration out of range, figures that contradict each other):
    /// [`Document::validate`].
    #[error("{}: not a valid {what}: {reason}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The kind of document expected ([`Document::NAME`]).
        what: &'static str,
        /// Why, naming the field.
        reason: String,
    },
    /// JSON of another schema, or of none.
    #[error(
        "{}: schema {}, not a {what} this version reads ({})",
        .path.display(),
        .found.as_deref().map_or("missing".to_string(), |f| format!("'{f}'")),
        .expected.join(", ")
    )]
    Schema {
        /// The file.
        path: PathBuf,
        /// The kind of document expected ([`Document::NAME`]).
        what: &'static str,
        /// Its schema, if it has one.
        found: Option<String>,
        /// The schemas read.
        expected: Vec<&'static str>,
    },
    /// A document whose structure would take far more memory than its size (many tiny
    /// strings or map entries): not one tlsperf wrote.
    #[error(
        "{}: its structure would take about {} MiB of memory once read, more than \
         {FOOTPRINT_FACTOR} times the file's size and {} MiB: tlsperf writes no {what} \
         like it",
        .path.display(), .cost >> 20, FOOTPRINT_BASE >> 20
    )]
    Footprint {
        /// The file.
        path: PathBuf,
        /// The kind of document expected ([`Document::NAME`]).
        what: &'static str,
        /// Its [`footprint`], bytes.
        cost: u64,
        /// The most it may be, bytes.
        limit: u64,
    },
    /// The value could not be encoded (a path that is not UTF-8…).
    #[error("cannot encode {} as JSON", .path.display())]
    Encode {
        /// Where it was to go.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// The file could not be written.
    #[error(transparent)]
    Write(#[from] FileError),
}

impl Classify for DocError {
    fn class(&self) -> ErrorClass {
        match self {
            DocError::Read { source, .. } => io_input_class(source),
            DocError::Json { .. }
            | DocError::Invalid { .. }
            | DocError::Schema { .. }
            | DocError::Footprint { .. } => ErrorClass::Input,
            DocError::Encode { .. } => ErrorClass::Runtime,
            DocError::Write(e) => e.class(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprints_of_dense_and_plain_structures() {
        assert_eq!(footprint(b"1"), Some(16));
        // A string: its handle and its bytes' smallest allocator chunk.
        assert_eq!(footprint(br#""abc""#), Some(24 + 32));
        assert_eq!(footprint(b"\"\""), Some(24));
        let long = format!("\"{}\"", "x".repeat(40));
        assert_eq!(footprint(long.as_bytes()), Some(24 + 48));
        // An object of one member: the object, the key, the entry, the value.
        assert_eq!(
            footprint(br#"{"k":[1,2]}"#),
            Some(32 + 56 + 48 + 32 + 2 * 16)
        );
        assert_eq!(footprint(b"[1,"), None);
        // 100,000 tiny map entries: about 8 times their text.
        let dense: String = std::iter::once("{".to_string())
            .chain((0..100_000).map(|i| format!("\"a{i:07}\":0,")))
            .chain(std::iter::once("\"z\":0}".to_string()))
            .collect();
        let f = footprint(dense.as_bytes()).unwrap();
        assert!(f > 7 * dense.len() as u64, "{f} for {}", dense.len());
        // Beyond 4 times the text, but within the constant: read.
        assert!(check_footprint(Path::new("dense.json"), "doc", dense.len(), f).is_ok());
        // The pass that reads the schema counts the same.
        let doc = format!("{{\"schema\":\"x\",\"m\":{dense}}}");
        let (_, costed) = head_costed(doc.as_bytes()).unwrap();
        assert_eq!(costed, footprint(doc.as_bytes()).unwrap());
    }

    #[test]
    fn sniffs_the_schema_alone() {
        assert_eq!(
            sniff(br#" {"rows": [1, 2], "schema": "tlsperf-lab/2", "x": {"schema": 1}}"#),
            Some("tlsperf-lab/2".into())
        );
        assert_eq!(sniff(b"1.5\n2.5\n"), None);
        assert_eq!(sniff(br#"{"schema": 3}"#), None);
        assert_eq!(sniff(br#"{"no": "schema"}"#), None);
        assert_eq!(sniff(br#"{"schema": "a", oops"#), None);
        assert_eq!(sniff(br#"{"schema": "a", "schema": "a"}"#), None);
    }

    /// A cut or broken object is told as broken JSON, where it breaks; a `schema` given
    /// twice as such, not as missing.
    #[test]
    fn the_head_says_why_there_is_no_schema() {
        assert_eq!(head(b"1.5\n2.5\n"), Ok(Head::NotAnObject));
        assert_eq!(head(br#"{"n": 1}"#), Ok(Head::NoSchema));
        assert_eq!(head(br#"{"schema": 1}"#), Ok(Head::NoSchema));
        assert_eq!(
            head(br#" {"schema": "x/1", "n": [1]}"#),
            Ok(Head::Schema("x/1".into()))
        );
        let e = head(b"{\"schema\": \"x/1\",\n \"n\": [1, 2").unwrap_err();
        assert_eq!(e.line, 2, "{e:?}");
        assert!(e.reason.contains("EOF"), "{e:?}");
        let e = head(br#"{"schema": "x/1"} trailing"#).unwrap_err();
        assert!(e.reason.contains("trailing"), "{e:?}");
        let e = head(b"{\"schema\": \"x/1\",\n\"schema\": \"x/1\"}").unwrap_err();
        assert!(e.reason.contains("\"schema\" is given twice"), "{e:?}");
        assert_eq!(e.line, 2, "{e:?}");
        let p = Path::new("d.json");
        let e = parse::<Doc>(
            p,
            b"{\"schema\": \"test-doc/2\",\n\"schema\": \"x\", \"n\": 1}",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("d.json:2:"), "{e}");
        assert!(e.to_string().contains("given twice"), "{e}");
        assert!(!e.to_string().contains("missing"), "{e}");
    }

    #[derive(Debug, Serialize, serde::Deserialize)]
    struct Doc {
        schema: String,
        n: u32,
        #[serde(default)]
        added_in_2: bool,
    }

    impl Document for Doc {
        const SCHEMA: &'static str = "test-doc/2";
        const READS: &'static [&'static str] = &["test-doc/1"];
        const NAME: &'static str = "test document";

        fn validate(&self) -> Result<(), String> {
            if self.n == 0 {
                return Err("n is 0 (at least 1)".into());
            }
            Ok(())
        }
    }

    #[test]
    fn reads_checking_the_schema_and_naming_the_place() {
        let p = Path::new("d.json");
        let d: Doc = parse(p, br#"{"schema": "test-doc/1", "n": 3}"#).unwrap();
        assert_eq!((d.n, d.added_in_2), (3, false));
        let e = parse::<Doc>(p, b"{\"schema\": \"test-doc/2\",\n \"n\": \"x\"}").unwrap_err();
        assert!(e.to_string().starts_with("d.json:2:"), "{e}");
        assert!(e.to_string().contains("test document"), "{e}");
        let e = parse::<Doc>(p, br#"{"schema": "other/1"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "d.json: schema 'other/1', not a test document this version reads \
             (test-doc/2, test-doc/1)"
        );
        let e = parse::<Doc>(p, b"{\n oops").unwrap_err();
        assert!(e.to_string().starts_with("d.json:2:"), "{e}");
        assert_eq!(e.class(), ErrorClass::Input);
        let e = parse::<Doc>(p, b"[1]").unwrap_err();
        assert!(e.to_string().contains("schema missing"), "{e}");
        let e = parse::<Doc>(p, br#"{"n": 1}"#).unwrap_err();
        assert!(e.to_string().contains("schema missing"), "{e}");
        // Values the document's own check refuses name the field.
        let e = parse::<Doc>(p, br#"{"schema": "test-doc/2", "n": 0}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "d.json: not a valid test document: n is 0 (at least 1)"
        );
        assert_eq!(e.class(), ErrorClass::Input);
    }

    #[test]
    fn writes_atomically_and_only_with_force_over_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.json");
        let d = Doc {
            schema: Doc::SCHEMA.into(),
            n: 1,
            added_in_2: true,
        };
        write(&d, &p, false).unwrap();
        assert!(write(&d, &p, false).is_err());
        write(&d, &p, true).unwrap();
        let back: Doc = read(&p).unwrap();
        assert_eq!(back.n, 1);
        assert!(std::fs::read_to_string(&p).unwrap().ends_with("}\n"));
    }
}
