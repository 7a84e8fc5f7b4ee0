//! Free TCP ports on 127.0.0.1, chosen before the nodes that will listen on them start.
//!
//! A node asked for port 0 gets an ephemeral port and announces it, which is enough while no
//! node needs another's address before that one starts. Raft replicas do: every server's
//! `[raft] peers` names every server's URL, and a restarted server must come back on the same
//! one. So the caller reserves the ports first and writes them into every config.
//!
//! [`reserve`] binds all `n` listeners **at once** before it drops any (so the kernel cannot
//! hand the same ephemeral port out twice within one call), reads their ports and closes them.
//! Between the drop and the node's own bind another process could take a port; that is rare
//! on a test machine, and the node then fails to start with its bind error in its log rather
//! than silently using another port. The nodes bind with SO_REUSEADDR (tokio's listener sets
//! it), so a closed listener's lingering TIME_WAIT state does not stop them.

use std::net::{Ipv4Addr, TcpListener};

#[derive(Debug, thiserror::Error)]
#[error("cannot reserve a port on 127.0.0.1: reserved={reserved} wanted={wanted} cause={cause}")]
pub struct PortError {
    pub reserved: usize,
    pub wanted: usize,
    pub cause: std::io::Error,
}

/// `n` distinct ports on 127.0.0.1 that were free a moment ago.
pub fn reserve(n: usize) -> Result<Vec<u16>, PortError> {
    let mut listeners = Vec::with_capacity(n);
    let mut ports = Vec::with_capacity(n);
    for _ in 0..n {
        let err = |cause| PortError {
            reserved: ports.len(),
            wanted: n,
            cause,
        };
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(err)?;
        let port = listener.local_addr().map_err(err)?.port();
        ports.push(port);
        // Kept open until every port is read: no two entries can be the same port.
        listeners.push(listener);
    }
    drop(listeners);
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_ports_are_distinct_nonzero_and_free_to_bind_again() {
        let ports = reserve(8).unwrap();
        assert_eq!(ports.len(), 8);
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), 8, "{ports:?}");
        assert!(!ports.contains(&0), "{ports:?}");
        for port in ports {
            TcpListener::bind((Ipv4Addr::LOCALHOST, port))
                .unwrap_or_else(|e| panic!("port {port} is not free after reserve: {e}"));
        }
    }

    #[test]
    fn reserving_no_port_is_an_empty_list() {
        assert_eq!(reserve(0).unwrap(), Vec::<u16>::new());
    }
}
