//! Choosing the object store by configuration: a local directory (the embedded default) or an
//! S3 bucket, optionally behind a local whole-file cache. The server and worker configs map
//! their `[dfs]` section onto this.

use std::path::PathBuf;
use std::sync::Arc;

use crate::cachefs::CacheFs;
use crate::dfs::{Dfs, LocalDfs};
use crate::dfs_traffic::{DfsTraffic, MeteredDfs};
use crate::error::Result;
use crate::s3_dfs::{S3Credentials, S3Dfs, S3Options};

// Built once per process: the size difference between variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum DfsConfig {
    /// SST files in a local directory.
    Local { dir: PathBuf },
    /// SST files in an S3 bucket.
    S3 {
        options: S3Options,
        /// `None` reads the standard AWS environment variables.
        credentials: Option<S3Credentials>,
        /// A local directory of whole files in front of S3, or none.
        cache: Option<CacheConfig>,
    },
}

#[derive(Debug, Clone)]
pub struct CacheConfig {
    pub dir: PathBuf,
    /// Bytes of files kept; least recently used files are evicted beyond it.
    pub budget_bytes: u64,
}

impl DfsConfig {
    /// Opens the configured store.
    pub fn open(&self) -> Result<Arc<dyn Dfs>> {
        self.open_metered(None)
    }

    /// Opens the configured store, reporting the bytes it moves over the network to
    /// `traffic`: an S3 store's reads and writes, beneath the file cache (a cache hit moves
    /// nothing); a local directory reports nothing.
    pub fn open_metered(&self, traffic: Option<DfsTraffic>) -> Result<Arc<dyn Dfs>> {
        Ok(match self {
            DfsConfig::Local { dir } => Arc::new(LocalDfs::open(dir)?),
            DfsConfig::S3 {
                options,
                credentials,
                cache,
            } => {
                let mut s3: Arc<dyn Dfs> = Arc::new(match credentials {
                    Some(c) => S3Dfs::open_with_credentials(options.clone(), c.clone())?,
                    None => S3Dfs::open(options.clone())?,
                });
                if let Some(traffic) = traffic {
                    s3 = Arc::new(MeteredDfs::new(s3, traffic));
                }
                match cache {
                    Some(c) => Arc::new(CacheFs::open(s3, &c.dir, c.budget_bytes)?),
                    None => s3,
                }
            }
        })
    }
}
