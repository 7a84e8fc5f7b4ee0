//! Spreading regions over their candidate workers by load.
//!
//! The input is grouped: group `g` holds `sizes[g]` interchangeable regions that may each go to
//! any worker of `candidates[g]`. The output is how many regions of each group each worker
//! reads. Two phases:
//!
//! 1. **Greedy.** Groups are taken in order of fewest candidates (ties: group order, which is
//!    the order of first appearance in the request). Each region goes to the least-loaded
//!    candidate, ties to the lowest worker index (workers are indexed by ascending id); a group
//!    is handed out in one step by "water filling", with the same result as one region at a
//!    time. A group with one candidate goes entirely to it.
//! 2. **Repair.** Greedy can be unlucky (two groups sharing a worker, handed out in the wrong
//!    order). A *cost-reducing path* is a chain of moves `u → x1 → … → v`, each moving one
//!    region that the previous worker holds to a worker that is also its candidate, with
//!    `load(u) ≥ load(v) + 2`; shifting regions along it lowers the sum of squared loads. While
//!    one exists (found by breadth-first search from the most loaded workers), shift as many
//!    regions as the path and the load gap allow.
//!
//! With no cost-reducing path left the assignment is an optimal semi-matching (Harvey, Ladner,
//! Lovász, Tamir, "Semi-matchings for bipartite graphs and load balancing", 2006): it minimises
//! every Lp norm of the load vector at once, so its maximum load is the smallest possible and
//! its sorted load vector is the most even one the candidates allow. In particular, if some
//! assignment gives the candidate workers counts that differ by at most one, this one does.
//!
//! Cost: `O(G log G + Σ|candidates|)` for greedy. A repair step is breadth-first searches over
//! the `W` workers (edges found by scanning the `G` groups), and a worker reached by a failed
//! search is not searched from again in that step, so a step costs about one search over all
//! workers, `O(W · G + Σ|candidates| · W)`; greedy leaves few steps to do. `G` is the number of
//! distinct replica-zone sets, so both phases are independent of the number of regions.

use std::cmp::Reverse;
use std::collections::VecDeque;

/// Regions per (group, worker), row-major by group.
pub(super) struct Counts {
    workers: usize,
    cells: Vec<usize>,
}

impl Counts {
    fn get(&self, group: usize, worker: usize) -> usize {
        self.cells[group * self.workers + worker]
    }

    pub(super) fn get_mut(&mut self, group: usize, worker: usize) -> &mut usize {
        &mut self.cells[group * self.workers + worker]
    }
}

/// How many regions of each group each worker reads: see the module documentation.
///
/// `candidates[g]` must be non-empty when `sizes[g] > 0`, hold indexes below `workers`, and be
/// ascending.
pub(super) fn balance(sizes: &[usize], candidates: &[&[usize]], workers: usize) -> Counts {
    let mut counts = Counts {
        workers,
        cells: vec![0; sizes.len() * workers],
    };
    let mut load = vec![0usize; workers];
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&g| (candidates[g].len(), g));
    for g in order {
        water_fill(&mut load, candidates[g], sizes[g], |w, n| {
            *counts.get_mut(g, w) += n;
        });
    }
    while repair_once(&mut counts, &mut load, candidates) {}
    counts
}

/// Gives `n` regions to `cands`, as if one at a time to the least-loaded candidate (ties to the
/// lowest index); `give(worker, how_many)` records each share and `load` is updated.
fn water_fill(load: &mut [usize], cands: &[usize], n: usize, mut give: impl FnMut(usize, usize)) {
    if n == 0 {
        return;
    }
    let mut by_load: Vec<usize> = cands.to_vec();
    by_load.sort_by_key(|&w| (load[w], w));
    // Raise the k least-loaded candidates to a common level while the regions last.
    let mut left = n;
    let mut k = 1;
    let mut level = load[by_load[0]];
    while k < by_load.len() {
        let next = load[by_load[k]];
        let need = (next - level) * k;
        if need > left {
            break;
        }
        left -= need;
        level = next;
        k += 1;
    }
    let (each, extra) = (left / k, left % k);
    // The `extra` regions left after the common raise go to the lowest indexes among the k.
    let mut raised: Vec<usize> = by_load[..k].to_vec();
    raised.sort_unstable();
    for (i, &w) in raised.iter().enumerate() {
        let target = level + each + usize::from(i < extra);
        let share = target - load[w];
        if share > 0 {
            give(w, share);
            load[w] = target;
        }
    }
}

/// Finds one cost-reducing path and shifts regions along it; false if there is none.
fn repair_once(counts: &mut Counts, load: &mut [usize], candidates: &[&[usize]]) -> bool {
    let workers = load.len();
    let Some(&min_load) = load.iter().min() else {
        return false;
    };
    let mut sources: Vec<usize> = (0..workers).collect();
    sources.sort_by_key(|&w| (Reverse(load[w]), w));
    let mut prev: Vec<Option<(usize, usize)>> = vec![None; workers];
    let mut visited = vec![false; workers];
    let mut queue = VecDeque::new();
    // Workers reached by a search from u that found nothing. Such a worker v comes later
    // (load(v) <= load(u)), and whatever v reaches was reached from u, so has a load of at
    // least load(u) - 1 >= load(v) - 1: a search from v would find nothing either.
    let mut settled = vec![false; workers];
    for u in sources {
        if load[u] < min_load + 2 {
            return false;
        }
        if settled[u] {
            continue;
        }
        prev.fill(None);
        visited.fill(false);
        visited[u] = true;
        queue.clear();
        queue.push_back(u);
        // The least-loaded reachable worker (ties: lowest index) that is at least 2 below u.
        let mut best: Option<usize> = None;
        while let Some(x) = queue.pop_front() {
            for (g, cands) in candidates.iter().enumerate() {
                if counts.get(g, x) == 0 {
                    continue;
                }
                for &y in *cands {
                    if visited[y] {
                        continue;
                    }
                    visited[y] = true;
                    prev[y] = Some((x, g));
                    queue.push_back(y);
                    if load[y] + 2 <= load[u] && best.is_none_or(|b| (load[y], y) < (load[b], b)) {
                        best = Some(y);
                    }
                }
            }
        }
        let Some(v) = best else {
            for (s, &v) in settled.iter_mut().zip(&visited) {
                *s |= v;
            }
            continue;
        };
        let mut step = v;
        let mut bottleneck = usize::MAX;
        while let Some((x, g)) = prev[step] {
            bottleneck = bottleneck.min(counts.get(g, x));
            step = x;
        }
        let shift = bottleneck.min((load[u] - load[v]) / 2);
        let mut step = v;
        while let Some((x, g)) = prev[step] {
            *counts.get_mut(g, x) -= shift;
            *counts.get_mut(g, step) += shift;
            step = x;
        }
        load[u] -= shift;
        load[v] += shift;
        return true;
    }
    false
}
