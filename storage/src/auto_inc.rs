//! How one INSERT statement hands out AUTO_INCREMENT values, as MariaDB's
//! handler asks InnoDB for them (`innodb_autoinc_lock_mode=1`): a row that
//! wants a value takes the next one of the statement's current batch; when
//! the batch is used up, the table's counter moves past a new batch
//! ([`IdBatches`] says how large). Storage runs it inside the commit; the
//! front end runs it for an INSERT inside a transaction, which must report
//! its ids before COMMIT.

use crate::IdBatches;

/// One statement's AUTO_INCREMENT state while it inserts its rows (the
/// handler's `next_insert_id` and reserved interval in MariaDB, with
/// InnoDB's `n_autoinc_rows`).
#[derive(Clone, Debug)]
pub struct IdAllocator {
    /// The value it hands out next, once it has handed out one.
    value: Option<u64>,
    /// How it reserves values, and the statement's row count for the first
    /// batch.
    batches: IdBatches,
    rows: usize,
    /// Batches reserved so far, and the end (exclusive) of the last one.
    taken: u32,
    batch_end: u64,
    /// InnoDB's `n_autoinc_rows`: the size of the first batch, less one
    /// per row written since (generated or not); while it is not 0, a new
    /// batch holds that many values, else [`IdBatches::size`] values.
    left: u64,
}

impl IdAllocator {
    /// The state of a statement of `rows` rows, before its first row.
    pub fn new(batches: IdBatches, rows: usize) -> Self {
        IdAllocator {
            value: None,
            batches,
            rows,
            taken: 0,
            batch_end: 0,
            left: 0,
        }
    }

    /// The value for a row that wants one: the next of the current batch,
    /// or the first of a new one, which `reserve(at_least, size)` takes
    /// from the table's counter (moving it past `size` values from the
    /// larger of `at_least` and itself) and returns the first of.
    pub fn take<E>(
        &mut self,
        reserve: impl FnOnce(u64, u64) -> std::result::Result<u64, E>,
    ) -> std::result::Result<u64, E> {
        let v = match self.value {
            Some(v) if v < self.batch_end => v,
            _ => {
                if self.left == 0 {
                    self.left = self.batches.size(self.taken, self.rows);
                }
                let first = reserve(self.value.unwrap_or(1).max(1), self.left)?;
                self.taken = self.taken.saturating_add(1);
                self.batch_end = first.saturating_add(self.left);
                first
            }
        };
        self.value = Some(v.saturating_add(1));
        Ok(v)
    }

    /// `generated`, taken by a row that was then not written (IGNORE
    /// skipped it, or ON DUPLICATE KEY UPDATE updated another row), goes to
    /// the next row (InnoDB's `restore_auto_increment`); the counter does
    /// not move back.
    pub fn give_back(&mut self, generated: u64) {
        self.value = Some(generated);
    }

    /// A row gave the explicit value `explicit`: once the statement has
    /// generated a value, the next one continues past it.
    pub fn follow(&mut self, explicit: u64) {
        if let Some(n) = self.value {
            self.value = Some(n.max(explicit.saturating_add(1)));
        }
    }

    /// A row (generated or not) passed its checks and goes to the keys.
    pub fn row_done(&mut self) {
        self.left = self.left.saturating_sub(1);
    }

    /// How the statement reserves its values.
    pub fn batches(&self) -> IdBatches {
        self.batches
    }
}

/// `counter` moved past a batch of `size` values from the larger of it and
/// `at_least`; the batch's first value.
pub(crate) fn reserve_batch(counter: &mut u64, at_least: u64, size: u64) -> u64 {
    let first = (*counter).max(at_least).max(1);
    *counter = (*counter).max(first.saturating_add(size));
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(batches: IdBatches, rows: &[Option<u64>], counter: &mut u64) -> Vec<u64> {
        let mut ids = IdAllocator::new(batches, rows.len());
        let mut out = Vec::new();
        for row in rows {
            match row {
                None => {
                    let v = ids
                        .take(|at_least, size| Ok::<_, ()>(reserve_batch(counter, at_least, size)))
                        .unwrap_or(0);
                    out.push(v);
                }
                Some(explicit) => {
                    ids.follow(*explicit);
                    *counter = (*counter).max(explicit + 1);
                    out.push(*explicit);
                }
            }
            ids.row_done();
        }
        out
    }

    #[test]
    fn a_values_list_reserves_a_value_per_row() {
        let mut counter = 1;
        assert_eq!(run(IdBatches::PerRow, &[None, None], &mut counter), [1, 2]);
        assert_eq!(counter, 3);
        // Explicit ids overtaking the batch: the rest come from a batch of
        // the rows not yet written (MariaDB: 16 17 50 51, next 52).
        let mut counter = 16;
        let rows = [None, None, Some(50), None];
        assert_eq!(
            run(IdBatches::PerRow, &rows, &mut counter),
            [16, 17, 50, 51]
        );
        assert_eq!(counter, 52);
    }

    #[test]
    fn a_select_reserves_growing_batches() {
        let mut counter = 1;
        let rows = [None; 4];
        assert_eq!(run(IdBatches::Growing, &rows, &mut counter), [1, 2, 3, 4]);
        // Batches 1 | 2 3 | 4 5 6 7.
        assert_eq!(counter, 8);
        assert_eq!(IdBatches::Growing.size(40, 0), IdBatches::MAX);
    }
}
