//! The msgpack payload of an unknown: extension 12 holds cty's refinements as a map from small integer keys
//! (cty `msgpack/unknown.go`); any other extension is a plain unknown.
//!
//! Decoding is best effort and never fails the value: an unknown stays unknown even if its refinements are
//! malformed. Keys we do not know are kept raw so that echoing the value back loses nothing; a known key with a
//! malformed value is dropped, because cty rejects it and dropping a refinement only widens the value.
//!
//! Encoding writes only what cty's decoder accepts for the slot's type (it rejects, say, a string prefix on a
//! number, and any refinement on a dynamic value), and keeps the payload under cty's 1 KiB limit.

use std::collections::BTreeMap;

use super::read::Reader;
use super::write::{write_ext_header, write_int, write_map_len, write_number, write_str};
use crate::value::{EncodeError, Number, Refinements, Type};

const EXT_REFINED: i8 = 12;
const NULLNESS: i64 = 1;
const STRING_PREFIX: i64 = 2;
const NUMBER_LOWER: i64 = 3;
const NUMBER_UPPER: i64 = 4;
const LENGTH_LOWER: i64 = 5;
const LENGTH_UPPER: i64 = 6;
/// cty refuses larger refinement payloads, and truncates string prefixes to 256 bytes to stay under it.
const MAX_PAYLOAD: usize = 1024;
const MAX_PREFIX: usize = 255;

/// Reads the refinements of an extension value; anything unreadable yields a plain unknown.
pub(super) fn decode(code: i8, payload: &[u8]) -> Refinements {
    if code != EXT_REFINED {
        return Refinements::default();
    }
    entries(payload)
        .map(|raw| interpret(&raw))
        .unwrap_or_default()
}

/// The map's entries as (key, raw msgpack of the value).
fn entries(payload: &[u8]) -> Option<BTreeMap<i64, &[u8]>> {
    let mut r = Reader::new(payload);
    let m = r.marker().ok()?;
    let Some((true, len)) = r.container_len(m).ok()? else {
        return None;
    };
    let n = r.count(len, 2).ok()?;
    let mut out = BTreeMap::new();
    for _ in 0..n {
        let km = r.marker().ok()?;
        let key = r.number(km).ok()??.as_i64()?;
        let before = r.rest();
        r.skip(0).ok()?;
        out.insert(key, &before[..before.len() - r.rest().len()]);
    }
    // cty ignores bytes after the map (reserved for future use), and so do we.
    Some(out)
}

fn interpret(raw: &BTreeMap<i64, &[u8]>) -> Refinements {
    let mut refs = Refinements::default();
    for (&key, &bytes) in raw {
        let understood = match key {
            NULLNESS => read_bool(bytes).map(|b| refs.nullness = Some(b)),
            STRING_PREFIX => read_string(bytes).map(|s| refs.string_prefix = Some(s)),
            NUMBER_LOWER => read_bound(bytes).map(|b| refs.number_lower = Some(b)),
            NUMBER_UPPER => read_bound(bytes).map(|b| refs.number_upper = Some(b)),
            LENGTH_LOWER => read_u64(bytes).map(|n| refs.length_lower = Some(n)),
            LENGTH_UPPER => read_u64(bytes).map(|n| refs.length_upper = Some(n)),
            _ => {
                refs.other.insert(key, bytes.to_vec());
                Some(())
            }
        };
        if understood.is_none() {
            tracing::debug!(key, "dropping a malformed refinement of an unknown value");
        }
    }
    refs
}

fn whole<T>(bytes: &[u8], f: impl FnOnce(&mut Reader) -> Option<T>) -> Option<T> {
    let mut r = Reader::new(bytes);
    let v = f(&mut r)?;
    r.rest().is_empty().then_some(v)
}

fn bool_of(r: &mut Reader) -> Option<bool> {
    match r.marker().ok()? {
        rmp::Marker::True => Some(true),
        rmp::Marker::False => Some(false),
        _ => None,
    }
}

fn read_bool(bytes: &[u8]) -> Option<bool> {
    whole(bytes, bool_of)
}

fn read_string(bytes: &[u8]) -> Option<String> {
    whole(bytes, |r| {
        let m = r.marker().ok()?;
        String::from_utf8(r.bytes(m).ok()??.to_vec()).ok()
    })
}

fn read_u64(bytes: &[u8]) -> Option<u64> {
    whole(bytes, |r| {
        let m = r.marker().ok()?;
        r.number(m).ok()??.as_u64()
    })
}

/// `[number, inclusive]`.
fn read_bound(bytes: &[u8]) -> Option<(Number, bool)> {
    whole(bytes, |r| {
        let m = r.marker().ok()?;
        if !matches!(r.container_len(m).ok()?, Some((false, 2))) {
            return None;
        }
        let m = r.marker().ok()?;
        let n = r.number(m).ok()??;
        Some((n, bool_of(r)?))
    })
}

/// Writes an unknown of type `ty`: `d4 00 00` when nothing is known (what clients send), else extension 12.
pub(super) fn encode(out: &mut Vec<u8>, ty: &Type, refs: &Refinements) -> Result<(), EncodeError> {
    let refs = applicable(ty, refs);
    if refs.is_empty() {
        out.extend_from_slice(&[0xd4, 0, 0]);
        return Ok(());
    }
    // Typed fields override raw entries under the same key (which `applicable` has already removed anyway).
    let mut entries: BTreeMap<i64, Vec<u8>> = refs.other.clone();
    let mut put = |key: i64, f: &dyn Fn(&mut Vec<u8>) -> Result<(), EncodeError>| {
        let mut b = Vec::new();
        f(&mut b)?;
        entries.insert(key, b);
        Ok::<(), EncodeError>(())
    };
    if let Some(b) = refs.nullness {
        put(NULLNESS, &|o| {
            o.push(if b { 0xc3 } else { 0xc2 });
            Ok(())
        })?;
    }
    if let Some(s) = &refs.string_prefix {
        put(STRING_PREFIX, &|o| write_str(o, s))?;
    }
    for (key, bound) in [
        (NUMBER_LOWER, &refs.number_lower),
        (NUMBER_UPPER, &refs.number_upper),
    ] {
        if let Some((n, inclusive)) = bound {
            put(key, &|o| {
                o.push(0x92); // fixarray of 2
                write_number(o, n)?;
                o.push(if *inclusive { 0xc3 } else { 0xc2 });
                Ok(())
            })?;
        }
    }
    for (key, len) in [
        (LENGTH_LOWER, refs.length_lower),
        (LENGTH_UPPER, refs.length_upper),
    ] {
        if let Some(n) = len {
            put(key, &|o| write_number(o, &Number::from(n)))?;
        }
    }
    // Unknown keys are the only unbounded part; without them the payload is at most ~330 bytes.
    let size: usize = entries.values().map(|b| b.len() + 9).sum();
    if size > MAX_PAYLOAD {
        entries.retain(|k, _| (NULLNESS..=LENGTH_UPPER).contains(k));
    }
    let mut payload = Vec::new();
    write_map_len(&mut payload, entries.len())?;
    for (key, bytes) in &entries {
        write_int(&mut payload, *key);
        payload.extend_from_slice(bytes);
    }
    write_ext_header(out, payload.len(), EXT_REFINED)?;
    out.extend_from_slice(&payload);
    Ok(())
}

/// The refinements cty accepts for an unknown of type `ty`.
fn applicable(ty: &Type, refs: &Refinements) -> Refinements {
    if *ty == Type::Dynamic {
        return Refinements::default();
    }
    let mut r = refs.clone();
    r.other
        .retain(|k, _| !(NULLNESS..=LENGTH_UPPER).contains(k));
    if *ty != Type::String {
        r.string_prefix = None;
    }
    if let Some(p) = &mut r.string_prefix
        && p.len() > MAX_PREFIX
    {
        // A shorter prefix is still true of the value; cut at a character boundary.
        let cut = (0..=MAX_PREFIX)
            .rev()
            .find(|&i| p.is_char_boundary(i))
            .unwrap_or(0);
        p.truncate(cut);
    }
    if r.string_prefix.as_deref() == Some("") {
        r.string_prefix = None;
    }
    if *ty != Type::Number {
        r.number_lower = None;
        r.number_upper = None;
    }
    if !matches!(ty, Type::List(_) | Type::Set(_) | Type::Map(_)) {
        r.length_lower = None;
        r.length_upper = None;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_prefix_example_and_writes_it_back() {
        // {1: false, 2: "pre-"}, as both clients send for `"pre-${unknown}"`.
        let payload = b"\x82\x01\xc2\x02\xa4pre-";
        let refs = decode(12, payload);
        assert!(refs.definitely_not_null());
        assert_eq!(refs.string_prefix.as_deref(), Some("pre-"));
        let mut out = Vec::new();
        encode(&mut out, &Type::String, &refs).unwrap();
        assert_eq!(
            out,
            [&[0xc7, payload.len() as u8, 12][..], payload].concat()
        );
        // cty refuses a prefix on anything but a string, and any refinement on a dynamic value.
        let mut out = Vec::new();
        encode(&mut out, &Type::Number, &refs).unwrap();
        assert_eq!(out, b"\xc7\x03\x0c\x81\x01\xc2");
        let mut out = Vec::new();
        encode(&mut out, &Type::Dynamic, &refs).unwrap();
        assert_eq!(out, [0xd4, 0, 0]);
    }

    #[test]
    fn keeps_unknown_keys_and_drops_malformed_known_ones() {
        // {2: 7 (a prefix must be a string), 9: [1]}
        let payload = b"\x82\x02\x07\x09\x91\x01";
        let refs = decode(12, payload);
        assert_eq!(refs.string_prefix, None);
        assert_eq!(refs.other.keys().collect::<Vec<_>>(), [&9]);
        let mut out = Vec::new();
        encode(&mut out, &Type::String, &refs).unwrap();
        assert_eq!(decode(12, &out[3..]), refs);
    }

    #[test]
    fn other_extensions_and_garbage_are_plain_unknowns() {
        assert!(decode(0, &[0]).is_empty());
        assert!(decode(12, b"\x91").is_empty());
        assert!(decode(12, b"\x81\xa1x\x01").is_empty());
    }

    #[test]
    fn long_prefixes_are_cut_to_what_cty_accepts() {
        let refs = Refinements {
            string_prefix: Some("é".repeat(200)),
            ..Refinements::default()
        };
        let mut out = Vec::new();
        encode(&mut out, &Type::String, &refs).unwrap();
        let back = decode(12, &out[4..]); // ext16 header: c8, 2-byte length, code
        assert_eq!(back.string_prefix, Some("é".repeat(127)));
    }
}
