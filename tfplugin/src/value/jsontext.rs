//! A small JSON parser for cty JSON. serde_json (without `arbitrary_precision`, a workspace-wide switch) turns
//! numbers into f64, while cty numbers are arbitrary precision: this keeps each number's text.
//!
//! Like the msgpack decoder it never trusts its input: nesting is capped and nothing is preallocated.

use super::error::DecodeError;
use super::msgpack::MAX_DEPTH;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Json {
    Null,
    Bool(bool),
    /// The number's text as written.
    Number(String),
    String(String),
    Array(Vec<Json>),
    /// In document order; duplicates are resolved by the caller.
    Object(Vec<(String, Json)>),
}

pub(super) fn parse(bytes: &[u8]) -> Result<Json, DecodeError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| DecodeError::new(format!("JSON is not UTF-8: {e}")))?;
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        pos: 0,
    };
    let v = p.value(0)?;
    p.ws();
    if p.pos != p.s.len() {
        return Err(p.err("unexpected text after the value"));
    }
    Ok(v)
}

impl Json {
    /// For handing a dynamic value's type to [`super::Type::from_json`].
    pub(super) fn to_serde(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Json::Null => J::Null,
            Json::Bool(b) => J::Bool(*b),
            Json::Number(n) => serde_json::from_str(n).unwrap_or_else(|_| J::String(n.clone())),
            Json::String(s) => J::String(s.clone()),
            Json::Array(items) => J::Array(items.iter().map(Json::to_serde).collect()),
            Json::Object(entries) => J::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_serde()))
                    .collect(),
            ),
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, what: &str) -> DecodeError {
        DecodeError::new(format!("invalid JSON at byte {}: {what}", self.pos))
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.pos) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        let hit = self.s.get(self.pos) == Some(&b);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn expect(&mut self, b: u8) -> Result<(), DecodeError> {
        if self.eat(b) {
            Ok(())
        } else {
            Err(self.err(&format!("expected {:?}", b as char)))
        }
    }

    fn keyword(&mut self, word: &str, v: Json) -> Result<Json, DecodeError> {
        if self.s[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err(self.err("unexpected character"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deeply"));
        }
        self.ws();
        match self.s.get(self.pos) {
            None => Err(self.err("unexpected end")),
            Some(b'n') => self.keyword("null", Json::Null),
            Some(b't') => self.keyword("true", Json::Bool(true)),
            Some(b'f') => self.keyword("false", Json::Bool(false)),
            Some(b'"') => self.string().map(Json::String),
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                if !self.eat(b']') {
                    loop {
                        items.push(self.value(depth + 1)?);
                        if self.eat(b']') {
                            break;
                        }
                        self.expect(b',')?;
                    }
                }
                Ok(Json::Array(items))
            }
            Some(b'{') => {
                self.pos += 1;
                let mut entries = Vec::new();
                if !self.eat(b'}') {
                    loop {
                        self.ws();
                        let k = self.string()?;
                        self.expect(b':')?;
                        entries.push((k, self.value(depth + 1)?));
                        if self.eat(b'}') {
                            break;
                        }
                        self.expect(b',')?;
                    }
                }
                Ok(Json::Object(entries))
            }
            Some(b'-' | b'0'..=b'9') => {
                let start = self.pos;
                while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') =
                    self.s.get(self.pos)
                {
                    self.pos += 1;
                }
                // The text is all ASCII, so the slice is on char boundaries; `Number` validates it later.
                Ok(Json::Number(self.text[start..self.pos].to_owned()))
            }
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        if self.s.get(self.pos) != Some(&b'"') {
            return Err(self.err("expected a string"));
        }
        self.pos += 1;
        let mut out = String::new();
        loop {
            // Copy the run up to the next quote or escape in one go; both are ASCII, so boundaries are valid.
            let start = self.pos;
            while let Some(&b) = self.s.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[start..self.pos]);
            match self.s.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = match self.s.get(self.pos) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            self.pos += 1;
                            let c = self.unicode_escape()?;
                            out.push(c);
                            continue;
                        }
                        _ => return Err(self.err("invalid escape")),
                    };
                    self.pos += 1;
                    out.push(c);
                }
                Some(_) => return Err(self.err("control character in string")),
                None => return Err(self.err("unterminated string")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, DecodeError> {
        let digits = self
            .s
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.err("short \\u escape"))?;
        let s = std::str::from_utf8(digits).map_err(|_| self.err("bad \\u escape"))?;
        let n = u32::from_str_radix(s, 16).map_err(|_| self.err("bad \\u escape"))?;
        self.pos += 4;
        Ok(n)
    }

    /// After `\u`: a code point, joining surrogate pairs. Lone surrogates become U+FFFD, as Go's decoder does.
    fn unicode_escape(&mut self) -> Result<char, DecodeError> {
        let hi = self.hex4()?;
        if (0xD800..0xDC00).contains(&hi) && self.s[self.pos..].starts_with(b"\\u") {
            let save = self.pos;
            self.pos += 2;
            let lo = self.hex4()?;
            if (0xDC00..0xE000).contains(&lo) {
                return Ok(
                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                        .unwrap_or('\u{FFFD}'),
                );
            }
            self.pos = save;
        }
        Ok(char::from_u32(hi).unwrap_or('\u{FFFD}'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_cty_writes() {
        let j = parse(br#" {"a": [1, -2.5e3, 0.100000000000000000001], "b": "x\"\u00e9\ud83d\ude00", "c": null} "#).unwrap();
        let Json::Object(e) = j else { panic!("{j:?}") };
        assert_eq!(
            e[0].1,
            Json::Array(vec![
                Json::Number("1".into()),
                Json::Number("-2.5e3".into()),
                Json::Number("0.100000000000000000001".into())
            ])
        );
        assert_eq!(e[1].1, Json::String("x\"é😀".into()));
        assert_eq!(e[2].1, Json::Null);
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "[",
            "[1,]",
            "{\"a\"}",
            "\"abc",
            "nul",
            "[1] x",
            "\"\\x\"",
            "\"\u{1}\"",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
        assert!(parse("[".repeat(1000).as_bytes()).is_err());
    }
}
