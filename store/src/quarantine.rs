//! Quarantined outputs at rest: the sealed bytes the runtime's encrypted store produces
//! (its format: KEK fingerprint, target, nonces, wrapped data key, ciphertext), one row
//! per (output, reader). The store never sees plaintext or the key-encryption key; the
//! runtime encrypts before [`Store::put_sealed`] and decrypts after
//! [`Store::get_sealed`].

use sqlx::Row;
use sqlx::any::AnyRow;
use tooltrust::Id;

use crate::clock;
use crate::error::StoreError;
use crate::store::Store;

/// One quarantined copy, sealed for one reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedCopy {
    /// The output's key.
    pub key: Id,
    /// The reader it is sealed for.
    pub reader: Id,
    /// The scope that produced it.
    pub target: Id,
    /// The sealed bytes (ciphertext and wrapped key), opaque to the store.
    pub sealed: Vec<u8>,
}

const PUT: &str = "store a quarantined copy";
const GET: &str = "read a quarantined copy";

impl Store {
    /// Stores `copy` for the tenant, replacing the copy for the same key and reader
    /// (as a KEK rotation rewraps it).
    pub async fn put_sealed(&self, copy: &SealedCopy) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO quarantine (tenant, key, reader, target, sealed, stored_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, key, reader) DO UPDATE \
             SET target = excluded.target, sealed = excluded.sealed, stored_at = excluded.stored_at",
        )
        .bind(self.tenant().as_str())
        .bind(copy.key.as_str())
        .bind(copy.reader.as_str())
        .bind(copy.target.as_str())
        .bind(copy.sealed.as_slice())
        .bind(clock::now())
        .execute(self.pool())
        .await
        .map_err(|e| self.engine().error(PUT, e))?;
        Ok(())
    }

    /// The tenant's copy of output `key` sealed for `reader`, if any.
    pub async fn get_sealed(
        &self,
        key: &Id,
        reader: &Id,
    ) -> Result<Option<SealedCopy>, StoreError> {
        let row = sqlx::query(
            "SELECT key, reader, target, sealed FROM quarantine \
             WHERE tenant = $1 AND key = $2 AND reader = $3",
        )
        .bind(self.tenant().as_str())
        .bind(key.as_str())
        .bind(reader.as_str())
        .fetch_optional(self.pool())
        .await
        .map_err(|e| self.engine().error(GET, e))?;
        row.as_ref().map(copy_of).transpose()
    }

    /// Every (key, reader) the tenant's quarantine holds, in order (to rewrap them all
    /// when the KEK rotates).
    pub async fn list_sealed(&self) -> Result<Vec<(Id, Id)>, StoreError> {
        self.sealed_where(None).await
    }

    /// The (key, reader) of every copy the tenant's quarantine holds of outputs that
    /// scope `target` produced, in order (what a reviewer of that scope's calls may ask
    /// to open).
    pub async fn sealed_by(&self, target: &Id) -> Result<Vec<(Id, Id)>, StoreError> {
        self.sealed_where(Some(target)).await
    }

    async fn sealed_where(&self, target: Option<&Id>) -> Result<Vec<(Id, Id)>, StoreError> {
        let query = match target {
            None => sqlx::query(
                "SELECT key, reader FROM quarantine WHERE tenant = $1 ORDER BY key, reader",
            )
            .bind(self.tenant().as_str()),
            Some(target) => sqlx::query(
                "SELECT key, reader FROM quarantine WHERE tenant = $1 AND target = $2 \
                 ORDER BY key, reader",
            )
            .bind(self.tenant().as_str())
            .bind(target.as_str()),
        };
        let rows = query
            .fetch_all(self.pool())
            .await
            .map_err(|e| self.engine().error(GET, e))?;
        rows.iter()
            .map(|row| Ok((id_at(row, 0, "key")?, id_at(row, 1, "reader")?)))
            .collect()
    }
}

fn copy_of(row: &AnyRow) -> Result<SealedCopy, StoreError> {
    Ok(SealedCopy {
        key: id_at(row, 0, "key")?,
        reader: id_at(row, 1, "reader")?,
        target: id_at(row, 2, "target")?,
        sealed: row
            .try_get::<Vec<u8>, _>(3)
            .map_err(|e| corrupt("sealed", e.to_string()))?,
    })
}

fn id_at(row: &AnyRow, i: usize, column: &str) -> Result<Id, StoreError> {
    let text: String = row.try_get(i).map_err(|e| corrupt(column, e.to_string()))?;
    Id::new(text).map_err(|e| corrupt(column, e.to_string()))
}

fn corrupt(column: &str, why: String) -> StoreError {
    StoreError::CorruptRow {
        table: "quarantine",
        key: column.to_owned(),
        reason: why,
    }
}
