//! A snapshot of one member's database: etcd's `Maintenance.Snapshot` stream, the bbolt file followed by its
//! SHA-256. The caller checks it (`domain::backup::verify`) before it goes anywhere.

use std::time::Duration;

use super::EtcdTarget;
use super::client::Etcd;
use super::error::{EtcdError, Result};

impl Etcd {
    /// The whole snapshot stream of `target`, read within `limit` (a large database takes longer than one
    /// request's timeout).
    pub async fn snapshot(&self, target: &EtcdTarget, limit: Duration) -> Result<Vec<u8>> {
        let failed = |message: String| EtcdError::Snapshot {
            target: target.to_string(),
            message,
        };
        let mut client = self.client(target).await.map_err(|f| failed(f.message))?;
        let read = async {
            let mut stream = client.snapshot().await.map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            // To the stream's end, not to `remaining_bytes == 0`: the last database chunk says 0 already, and the
            // SHA-256 comes after it in a message of its own.
            while let Some(msg) = stream.message().await.map_err(|e| e.to_string())? {
                out.extend_from_slice(msg.blob());
            }
            Ok::<_, String>(out)
        };
        match tokio::time::timeout(limit, read).await {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(message)) => Err(failed(message)),
            Err(_) => Err(failed(format!("the stream did not end within {limit:?}"))),
        }
    }
}
