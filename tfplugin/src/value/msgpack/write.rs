//! Writing msgpack. Hand-rolled rather than rmp's writers: writing to a Vec cannot fail, and rmp's signatures
//! would make every call site handle an io::Error that cannot happen.

use crate::value::error::EncodeError;
use crate::value::number::{Number, Wire};

fn len32(n: usize) -> Result<u32, EncodeError> {
    u32::try_from(n).map_err(|_| EncodeError::new(format!("length {n} is too large for msgpack")))
}

/// A length header: the fix form `base | n` when `n < max`, else the 8/16/32-bit form from `sized` (0 = none).
fn write_header(
    out: &mut Vec<u8>,
    n: usize,
    fix: Option<(u8, u32)>,
    sized: [u8; 3],
) -> Result<(), EncodeError> {
    let n = len32(n)?;
    match fix {
        Some((base, max)) if n < max => out.push(base | n as u8),
        _ if n <= 0xff && sized[0] != 0 => out.extend_from_slice(&[sized[0], n as u8]),
        _ if n <= 0xffff => {
            out.push(sized[1]);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        _ => {
            out.push(sized[2]);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
    Ok(())
}

pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) -> Result<(), EncodeError> {
    write_header(out, s.len(), Some((0xa0, 32)), [0xd9, 0xda, 0xdb])?;
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

pub(crate) fn write_bin(out: &mut Vec<u8>, b: &[u8]) -> Result<(), EncodeError> {
    write_header(out, b.len(), None, [0xc4, 0xc5, 0xc6])?;
    out.extend_from_slice(b);
    Ok(())
}

pub(crate) fn write_array_len(out: &mut Vec<u8>, n: usize) -> Result<(), EncodeError> {
    write_header(out, n, Some((0x90, 16)), [0, 0xdc, 0xdd])
}

pub(crate) fn write_map_len(out: &mut Vec<u8>, n: usize) -> Result<(), EncodeError> {
    write_header(out, n, Some((0x80, 16)), [0, 0xde, 0xdf])
}

/// An extension header (ext 8/16/32; fixext forms are only an optimisation).
pub(crate) fn write_ext_header(out: &mut Vec<u8>, n: usize, code: i8) -> Result<(), EncodeError> {
    write_header(out, n, None, [0xc7, 0xc8, 0xc9])?;
    out.push(code as u8);
    Ok(())
}

pub(crate) fn write_int(out: &mut Vec<u8>, i: i64) {
    match i {
        0..=0x7f => out.push(i as u8),
        -32..=-1 => out.push(i as i8 as u8),
        0x80.. => write_uint(out, i as u64),
        _ if i >= i64::from(i8::MIN) => out.extend_from_slice(&[0xd0, i as i8 as u8]),
        _ if i >= i64::from(i16::MIN) => {
            out.push(0xd1);
            out.extend_from_slice(&(i as i16).to_be_bytes());
        }
        _ if i >= i64::from(i32::MIN) => {
            out.push(0xd2);
            out.extend_from_slice(&(i as i32).to_be_bytes());
        }
        _ => {
            out.push(0xd3);
            out.extend_from_slice(&i.to_be_bytes());
        }
    }
}

pub(crate) fn write_uint(out: &mut Vec<u8>, u: u64) {
    if let Ok(b) = u8::try_from(u) {
        out.extend_from_slice(&[0xcc, b]);
    } else if let Ok(h) = u16::try_from(u) {
        out.push(0xcd);
        out.extend_from_slice(&h.to_be_bytes());
    } else if let Ok(w) = u32::try_from(u) {
        out.push(0xce);
        out.extend_from_slice(&w.to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend_from_slice(&u.to_be_bytes());
    }
}

pub(crate) fn write_number(out: &mut Vec<u8>, n: &Number) -> Result<(), EncodeError> {
    match n.wire() {
        Wire::Int(i) => write_int(out, i),
        Wire::UInt(u) => write_uint(out, u),
        Wire::Float(f) => {
            out.push(0xcb);
            out.extend_from_slice(&f.to_bits().to_be_bytes());
        }
        Wire::Decimal => write_str(out, &n.to_string())?,
        Wire::NaN => return Err(EncodeError::new("NaN is not a number")),
    }
    Ok(())
}
