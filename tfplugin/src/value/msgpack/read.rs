//! Reading msgpack from untrusted bytes: every read is bounds-checked and every length is checked against the
//! bytes left before anything is allocated.

use rmp::Marker;

use super::MAX_DEPTH;
use crate::value::error::DecodeError;
use crate::value::number::Number;

/// A cursor over untrusted bytes; every read is bounds-checked.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub(crate) fn rest(&self) -> &'a [u8] {
        self.buf
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::new(format!(
                "truncated: need {n} bytes, {} left",
                self.buf.len()
            )));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    }

    pub(crate) fn marker(&mut self) -> Result<Marker, DecodeError> {
        Ok(Marker::from_u8(self.take(1)?[0]))
    }

    /// A length for a collection of `len` items, refused if the input cannot possibly hold that many (each item
    /// takes at least `min_item` bytes), so a forged header cannot make us allocate.
    pub(crate) fn count(&self, len: u64, min_item: usize) -> Result<usize, DecodeError> {
        match usize::try_from(len) {
            Ok(n) if n.saturating_mul(min_item) <= self.buf.len() => Ok(n),
            _ => Err(DecodeError::new(format!(
                "length {len} exceeds the {} bytes left",
                self.buf.len()
            ))),
        }
    }

    /// After `m`, the length of an array (`Some(false)`), map (`Some(true)`) or `None` for other markers.
    pub(crate) fn container_len(&mut self, m: Marker) -> Result<Option<(bool, u64)>, DecodeError> {
        Ok(Some(match m {
            Marker::FixArray(n) => (false, n.into()),
            Marker::Array16 => (false, self.be(2)?),
            Marker::Array32 => (false, self.be(4)?),
            Marker::FixMap(n) => (true, n.into()),
            Marker::Map16 => (true, self.be(2)?),
            Marker::Map32 => (true, self.be(4)?),
            _ => return Ok(None),
        }))
    }

    /// After `m`, the bytes of a str or bin, or `None` for other markers.
    pub(crate) fn bytes(&mut self, m: Marker) -> Result<Option<&'a [u8]>, DecodeError> {
        let n = match m {
            Marker::FixStr(n) => n.into(),
            Marker::Str8 | Marker::Bin8 => self.be(1)?,
            Marker::Str16 | Marker::Bin16 => self.be(2)?,
            Marker::Str32 | Marker::Bin32 => self.be(4)?,
            _ => return Ok(None),
        };
        Ok(Some(self.take(self.count(n, 1)?)?))
    }

    /// After `m`, an extension's type and payload, or `None` for other markers.
    pub(crate) fn ext(&mut self, m: Marker) -> Result<Option<(i8, &'a [u8])>, DecodeError> {
        let n = match m {
            Marker::FixExt1 => 1,
            Marker::FixExt2 => 2,
            Marker::FixExt4 => 4,
            Marker::FixExt8 => 8,
            Marker::FixExt16 => 16,
            Marker::Ext8 => self.be(1)?,
            Marker::Ext16 => self.be(2)?,
            Marker::Ext32 => self.be(4)?,
            _ => return Ok(None),
        };
        let ty = self.take(1)?[0] as i8;
        Ok(Some((ty, self.take(self.count(n, 1)?)?)))
    }

    /// After `m`, a number in any of cty's wire forms, or `None` for other markers.
    pub(crate) fn number(&mut self, m: Marker) -> Result<Option<Number>, DecodeError> {
        Ok(Some(match m {
            Marker::FixPos(n) => i64::from(n).into(),
            Marker::FixNeg(n) => i64::from(n).into(),
            Marker::U8 => self.be(1)?.into(),
            Marker::U16 => self.be(2)?.into(),
            Marker::U32 => self.be(4)?.into(),
            Marker::U64 => self.be(8)?.into(),
            Marker::I8 => i64::from(self.be(1)? as u8 as i8).into(),
            Marker::I16 => i64::from(self.be(2)? as u16 as i16).into(),
            Marker::I32 => i64::from(self.be(4)? as u32 as i32).into(),
            Marker::I64 => (self.be(8)? as i64).into(),
            Marker::F32 => f32::from_bits(self.be(4)? as u32).into(),
            Marker::F64 => f64::from_bits(self.be(8)?).into(),
            _ => match self.bytes(m)? {
                Some(b) => std::str::from_utf8(b)
                    .map_err(|_| DecodeError::new("a number string is not UTF-8"))?
                    .parse::<Number>()
                    .map_err(DecodeError::new)?,
                None => return Ok(None),
            },
        }))
    }

    /// Skips one value of any shape, for refinement keys we keep raw.
    pub(crate) fn skip(&mut self, depth: usize) -> Result<(), DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::new("nested too deeply"));
        }
        let m = self.marker()?;
        if let Some((is_map, len)) = self.container_len(m)? {
            let items = self.count(len, if is_map { 2 } else { 1 })? * if is_map { 2 } else { 1 };
            return (0..items).try_for_each(|_| self.skip(depth + 1));
        }
        if self.bytes(m)?.is_some() || self.ext(m)?.is_some() || self.number(m)?.is_some() {
            return Ok(());
        }
        match m {
            Marker::Null | Marker::True | Marker::False => Ok(()),
            _ => Err(DecodeError::new(format!("invalid msgpack marker {m:?}"))),
        }
    }
}
