//! The names of the last insert's samples, in order, back to back in one buffer. A pass
//! sends the same series in the same order each second, so a sample's series is found by
//! comparing its name with the one recorded at its position — a few contiguous pages —
//! instead of probing the index, whose keys are an allocation each (issue 41: the
//! koordlet's CPU follows the pages it touches a second).

#[derive(Default)]
pub struct Order {
    names: String,
    /// Each name's end in `names` and its series id.
    at: Vec<(u32, u32)>,
    /// Set by an insert's first miss: from there on its names are recorded, not compared.
    recording: bool,
}

impl Order {
    pub fn start(&mut self) {
        self.recording = false;
    }

    /// The id of the `i`th sample's series when its name is the one recorded there; on a
    /// miss the order is cut at `i` and the rest of the insert is recorded.
    pub fn hit(&mut self, i: usize, name: &str) -> Option<u32> {
        if self.recording {
            return None;
        }
        let recorded = self
            .at
            .get(i)
            .filter(|&&(end, _)| self.names.get(self.start_of(i)..end as usize) == Some(name));
        if let Some(&(_, id)) = recorded {
            return Some(id);
        }
        self.truncate(i);
        self.recording = true;
        None
    }

    /// Records the `i`th sample's series after a miss.
    pub fn record(&mut self, i: usize, name: &str, id: u32) {
        if self.recording && self.at.len() == i {
            self.names.push_str(name);
            self.at.push((self.names.len() as u32, id));
        }
    }

    /// Ends an insert of `n` samples.
    pub fn finish(&mut self, n: usize) {
        if !self.recording {
            self.truncate(n);
        }
    }

    /// Forgets everything (series were removed: their ids must not be found here).
    pub fn clear(&mut self) {
        self.names = String::new();
        self.at = Vec::new();
    }

    fn start_of(&self, i: usize) -> usize {
        i.checked_sub(1).map_or(0, |j| self.at[j].0 as usize)
    }

    fn truncate(&mut self, i: usize) {
        if i < self.at.len() {
            self.names.truncate(self.start_of(i));
            self.at.truncate(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one insert through the order; misses get ids from `ids`.
    fn pass(o: &mut Order, names: &[&str], ids: &[(&str, u32)]) -> (Vec<u32>, usize) {
        o.start();
        let mut misses = 0;
        let found = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                o.hit(i, n).unwrap_or_else(|| {
                    misses += 1;
                    let id = ids.iter().find(|x| x.0 == *n).unwrap().1;
                    o.record(i, n, id);
                    id
                })
            })
            .collect();
        o.finish(names.len());
        (found, misses)
    }

    #[test]
    fn a_repeated_pass_hits_and_a_changed_one_is_recorded_from_its_first_change() {
        let ids = [("a", 1), ("b", 2), ("c", 3), ("d", 4)];
        let mut o = Order::default();
        assert_eq!(pass(&mut o, &["a", "b", "c"], &ids), (vec![1, 2, 3], 3));
        assert_eq!(pass(&mut o, &["a", "b", "c"], &ids), (vec![1, 2, 3], 0));
        assert_eq!(pass(&mut o, &["a", "d", "c"], &ids), (vec![1, 4, 3], 2));
        assert_eq!(
            pass(&mut o, &["a", "d"], &ids),
            (vec![1, 4], 0),
            "a shorter pass"
        );
        assert_eq!(pass(&mut o, &["a", "d", "c"], &ids), (vec![1, 4, 3], 1));
        o.clear();
        assert_eq!(pass(&mut o, &["a"], &ids), (vec![1], 1));
    }
}
