//! Reading the values under a key prefix, a page at a time: what a check of what etcd holds needs (which
//! encryption key each stored Secret is under, `ha_domain::secrets_encryption::encrypted_with`), without asking
//! one member for the whole keyspace in a single response.

use etcd_client::GetOptions;

use super::EtcdTarget;
use super::client::Etcd;
use super::error::{EtcdError, Result};

/// Keys per request: small enough that a page of large Secrets (at most 1 MiB each) stays far below gRPC's
/// message limit in practice, large enough that a cluster's Secrets take a few round trips.
const PAGE: i64 = 200;

impl Etcd {
    /// Calls `each` with every key and value under `prefix`, in key order, a page at a time, each page from the
    /// first of `endpoints` that answers (a linearizable read, so what the cluster committed is what is seen).
    pub async fn scan_prefix(
        &self,
        endpoints: &[EtcdTarget],
        prefix: &str,
        mut each: impl FnMut(&[u8], &[u8]),
    ) -> Result<()> {
        let end = prefix_end(prefix.as_bytes());
        let mut from = prefix.as_bytes().to_vec();
        loop {
            let (start, end) = (from.clone(), end.clone());
            let resp = self
                .call_any(endpoints, |mut c| {
                    let (start, end) = (start.clone(), end.clone());
                    async move {
                        c.get(
                            start,
                            Some(GetOptions::new().with_range(end).with_limit(PAGE)),
                        )
                        .await
                    }
                })
                .await
                .map_err(|source| EtcdError::Scan {
                    prefix: prefix.to_string(),
                    source,
                })?;
            for kv in resp.kvs() {
                each(kv.key(), kv.value());
            }
            match resp.kvs().last() {
                Some(last) if resp.more() => {
                    // The next page starts just after the last key seen.
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => return Ok(()),
            }
        }
    }
}

/// The first key after every key that starts with `prefix` (etcd's range end for a prefix).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (or empty): to the end of the keyspace.
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn the_range_end_of_a_prefix_is_the_next_key_after_all_it_starts() {
        assert_eq!(prefix_end(b"/registry/secrets/"), b"/registry/secrets0");
        assert_eq!(prefix_end(b"a\xff"), b"b");
        assert_eq!(prefix_end(b"\xff\xff"), [0]);
    }
}
