//! Where the local cluster's regions are led, and moving that leadership.
//!
//! Raft elects a region's leader wherever an election timeout fires first; the local cluster
//! wants its regions led where the two-server layout had them (`server-a` below the split key,
//! `server-b` from it on), so that queries, offloads and zones land where the demo explains
//! them. [`place`] asks each region's current leader to hand over (`POST
//! /admin/transfer_leader`) until every region is led where the caller wants, as PD's
//! transfer-leader operator does. [`leaders`] is the cluster's view: every server lists every
//! region it holds a replica of with the leader it knows; the answer naming the highest term
//! wins.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use prost::Message as _;
use wire::region::{Region, RegionsResponse, TransferLeaderRequest};

/// Timeout of one HTTP call.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between two looks at the leaders.
const POLL: Duration = Duration::from_millis(50);
/// A transfer asked for is asked again after this long (raft-rs drops one whose target did
/// not catch up within an election timeout).
const RETRANSFER: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    #[error("no server answered GET /regions: {0}")]
    NoServer(String),
    #[error("undecodable /regions answer: server={server} cause={cause}")]
    Decode {
        server: String,
        cause: prost::DecodeError,
    },
    #[error("leaders not in place after {waited:?}: expected {expected}, found {found}")]
    Timeout {
        waited: Duration,
        expected: String,
        found: String,
    },
}

/// One region as the cluster reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Led {
    /// The newest description of the region among the answers (highest epoch).
    pub region: Region,
    /// Its leader's store id and term, from the answer naming the highest term (None: no
    /// server knows a leader).
    pub leader: Option<(u64, u64)>,
}

/// Every region any of `servers` (`(store id, URL)`) holds, by id, with its leader. Servers
/// that do not answer are skipped; an error only when none answers.
pub fn leaders(servers: &[(u64, String)]) -> Result<BTreeMap<u64, Led>, PlacementError> {
    let mut answers = Vec::new();
    let mut failures = Vec::new();
    for (_, url) in servers {
        match regions_of(url) {
            Ok(answer) => answers.push(answer),
            Err(e @ PlacementError::Decode { .. }) => return Err(e),
            Err(e) => failures.push(e.to_string()),
        }
    }
    if failures.len() == servers.len() {
        return Err(PlacementError::NoServer(failures.join("; ")));
    }
    Ok(merge(answers))
}

/// `GET /regions` of the server at `url`.
pub fn regions_of(url: &str) -> Result<RegionsResponse, PlacementError> {
    let reply = harness::http::get_ok(&format!("{url}{}", wire::paths::REGIONS), CALL_TIMEOUT)
        .map_err(|e| PlacementError::NoServer(format!("{url}: {e}")))?;
    RegionsResponse::decode(reply.body.as_ref()).map_err(|cause| PlacementError::Decode {
        server: url.to_string(),
        cause,
    })
}

/// Each region's data version (its applied Raft index, plus a base) on the server at `url`.
pub fn data_versions(url: &str) -> Result<BTreeMap<u64, u64>, PlacementError> {
    Ok(regions_of(url)?
        .regions
        .into_iter()
        .map(|r| (r.id, r.data_version))
        .collect())
}

/// The servers' answers as one view: per region the description with the highest epoch and
/// the leader named with the highest term.
fn merge(answers: Vec<RegionsResponse>) -> BTreeMap<u64, Led> {
    let mut out: BTreeMap<u64, Led> = BTreeMap::new();
    for answer in answers {
        for r in answer.regions {
            let named = (r.leader_store_id != 0).then_some((r.leader_store_id, r.leader_term));
            let led = out.entry(r.id).or_insert_with(|| Led {
                region: r.clone(),
                leader: None,
            });
            if named.is_some_and(|(_, term)| led.leader.is_none_or(|(_, t)| term > t)) {
                led.leader = named;
            }
            if r.ver > led.region.ver {
                led.region = r;
            }
        }
    }
    out
}

/// A region led elsewhere than wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Misplaced {
    pub region_id: u64,
    /// Its leader's store id (None: no server knows one).
    pub leader: Option<u64>,
    /// The store that should lead it.
    pub want: u64,
}

/// The regions of `leaders` not led by the store `want` names for them.
pub fn misplaced(leaders: &BTreeMap<u64, Led>, want: &dyn Fn(&Region) -> u64) -> Vec<Misplaced> {
    leaders
        .iter()
        .filter_map(|(id, led)| {
            let target = want(&led.region);
            let leader = led.leader.map(|(store, _)| store);
            (leader != Some(target)).then_some(Misplaced {
                region_id: *id,
                leader,
                want: target,
            })
        })
        .collect()
}

/// Waits until every region has a leader, then moves each region's leadership to the store
/// `want` names for it, and returns once every region is led there (at most `timeout`).
/// `servers` are `(store id, URL)`; `want` must name one of them.
pub fn place(
    servers: &[(u64, String)],
    want: &dyn Fn(&Region) -> u64,
    timeout: Duration,
) -> Result<(), PlacementError> {
    let started = Instant::now();
    let mut asked: BTreeMap<u64, Instant> = BTreeMap::new();
    loop {
        // A server still starting may refuse: only an answer from none is fatal, and only at
        // the deadline.
        let now = match leaders(servers) {
            Ok(now) => now,
            Err(_) if started.elapsed() < timeout => {
                std::thread::sleep(POLL);
                continue;
            }
            Err(e) => return Err(e),
        };
        let wrong = misplaced(&now, want);
        if !now.is_empty() && wrong.is_empty() {
            return Ok(());
        }
        if started.elapsed() >= timeout {
            let describe = |f: &dyn Fn(&Misplaced) -> String| {
                wrong.iter().map(f).collect::<Vec<_>>().join(", ")
            };
            return Err(PlacementError::Timeout {
                waited: timeout,
                expected: describe(&|m| format!("region {} on store {}", m.region_id, m.want)),
                found: describe(&|m| match m.leader {
                    Some(s) => format!("region {} on store {s}", m.region_id),
                    None => format!("region {} without a leader", m.region_id),
                }),
            });
        }
        for &Misplaced {
            region_id,
            leader,
            want: to,
        } in &wrong
        {
            let Some(from) = leader else { continue };
            if asked
                .get(&region_id)
                .is_some_and(|at| at.elapsed() < RETRANSFER)
            {
                continue;
            }
            let Some((_, url)) = servers.iter().find(|(id, _)| *id == from) else {
                continue;
            };
            let body = TransferLeaderRequest {
                region_id,
                to_store_id: to,
            }
            .encode_to_vec();
            // Whatever the answer (409: leadership moved meanwhile; a server restarting),
            // the next look at the leaders decides what to ask next.
            let _ = harness::http::post_ok(
                &format!("{url}{}", wire::paths::ADMIN_TRANSFER_LEADER),
                body,
                CALL_TIMEOUT,
            );
            asked.insert(region_id, Instant::now());
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn led(id: u64, start: &[u8], leader: Option<u64>) -> (u64, Led) {
        (
            id,
            Led {
                region: Region {
                    id,
                    start: start.to_vec(),
                    ..Region::default()
                },
                leader: leader.map(|s| (s, 1)),
            },
        )
    }

    fn answer(id: u64, ver: u64, leader: u64, term: u64) -> RegionsResponse {
        RegionsResponse {
            regions: vec![Region {
                id,
                ver,
                leader_store_id: leader,
                leader_term: term,
                ..Region::default()
            }],
            ..RegionsResponse::default()
        }
    }

    #[test]
    fn the_leader_named_with_the_highest_term_and_the_newest_epoch_win() {
        let view = merge(vec![
            answer(7, 2, 1, 5),
            answer(7, 3, 0, 0),
            answer(7, 1, 2, 6),
            answer(8, 1, 0, 0),
        ]);
        assert_eq!(view[&7].leader, Some((2, 6)));
        assert_eq!(view[&7].region.ver, 3);
        assert_eq!(view[&8].leader, None);
        let view = merge(vec![answer(7, 1, 2, 6), answer(7, 1, 1, 5)]);
        assert_eq!(
            view[&7].leader,
            Some((2, 6)),
            "an older term never replaces a newer one"
        );
    }

    #[test]
    fn misplaced_lists_regions_led_elsewhere_or_without_a_leader() {
        let now: BTreeMap<u64, Led> = [
            led(1, b"", Some(1)),
            led(2, b"m", Some(1)),
            led(3, b"x", None),
        ]
        .into();
        let want = |r: &Region| {
            if r.start.as_slice() < b"m".as_slice() {
                1
            } else {
                2
            }
        };
        let m = |region_id, leader, want| Misplaced {
            region_id,
            leader,
            want,
        };
        assert_eq!(
            misplaced(&now, &want),
            vec![m(2, Some(1), 2), m(3, None, 2)]
        );
        let placed: BTreeMap<u64, Led> = [led(1, b"", Some(1)), led(2, b"m", Some(2))].into();
        assert!(misplaced(&placed, &want).is_empty());
    }
}
