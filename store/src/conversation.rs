//! Conversations as the agent persists them: an opaque JSON document per id, with a
//! revision that rises by one at every save, so that two processes continuing the same
//! conversation cannot silently overwrite each other.

use serde_json::Value;
use sqlx::Row;
use tooltrust::Id;

use crate::clock;
use crate::error::{ConversationError, StoreError};
use crate::store::Store;

/// A saved conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// Its id.
    pub id: Id,
    /// How many times it was saved (1 after the first save).
    pub revision: u64,
    /// The document, as saved.
    pub body: Value,
    /// When it was last saved.
    pub updated_at: String,
}

const SAVE: &str = "save a conversation";
const LOAD: &str = "load a conversation";

impl Store {
    /// Saves `body` as conversation `id` of the tenant, whatever revision it is at, and
    /// returns the new revision.
    pub async fn save_conversation(&self, id: &Id, body: &Value) -> Result<u64, StoreError> {
        loop {
            match self.save(id, body, None).await {
                Ok(revision) => return Ok(revision),
                Err(ConversationError::Store(error)) => return Err(error),
                // Another first save won the race for the new row: save after it.
                Err(ConversationError::RevisionConflict { .. }) => continue,
            }
        }
    }

    /// Saves `body` only if the conversation is still at `expected` (0: it must not
    /// exist yet), and returns the new revision; otherwise
    /// [`ConversationError::RevisionConflict`] and nothing changes.
    pub async fn save_conversation_if(
        &self,
        id: &Id,
        body: &Value,
        expected: u64,
    ) -> Result<u64, ConversationError> {
        self.save(id, body, Some(expected)).await
    }

    async fn save(
        &self,
        id: &Id,
        body: &Value,
        expected: Option<u64>,
    ) -> Result<u64, ConversationError> {
        let engine = self.engine();
        let error = |e| engine.error(SAVE, e);
        let mut tx = engine.begin_write(self.pool(), SAVE).await?;
        let current = sqlx::query(match engine {
            crate::Engine::Sqlite => {
                "SELECT revision FROM conversation WHERE tenant = $1 AND id = $2"
            }
            crate::Engine::Postgres => {
                "SELECT revision FROM conversation WHERE tenant = $1 AND id = $2 FOR UPDATE"
            }
        })
        .bind(self.tenant().as_str())
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(error)?
        .map(|row| row.try_get::<i64, _>(0))
        .transpose()
        .map_err(error)?
        .map_or(0, |revision| revision.max(0) as u64);
        if let Some(expected) = expected
            && expected != current
        {
            return Err(ConversationError::RevisionConflict {
                id: id.clone(),
                expected,
                found: current,
            });
        }
        let revision = current + 1;
        // On PostgreSQL two first saves can race past the SELECT (there is no row to
        // lock yet); the primary key lets one insert win and the other fail, not both.
        let written = sqlx::query(
            "INSERT INTO conversation (tenant, id, revision, body, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, id) DO UPDATE \
             SET revision = excluded.revision, body = excluded.body, updated_at = excluded.updated_at \
             WHERE conversation.revision = $6",
        )
        .bind(self.tenant().as_str())
        .bind(id.as_str())
        .bind(revision as i64)
        .bind(body.to_string())
        .bind(clock::now())
        .bind(current as i64)
        .execute(&mut *tx)
        .await
        .map_err(error)?;
        if written.rows_affected() != 1 {
            return Err(ConversationError::RevisionConflict {
                id: id.clone(),
                expected: current,
                found: revision,
            });
        }
        engine.commit(tx, SAVE).await?;
        Ok(revision)
    }

    /// The tenant's conversation `id`, if it was saved.
    pub async fn load_conversation(&self, id: &Id) -> Result<Option<Conversation>, StoreError> {
        let error = |e| self.engine().error(LOAD, e);
        let Some(row) = sqlx::query(
            "SELECT revision, body, updated_at FROM conversation WHERE tenant = $1 AND id = $2",
        )
        .bind(self.tenant().as_str())
        .bind(id.as_str())
        .fetch_optional(self.pool())
        .await
        .map_err(error)?
        else {
            return Ok(None);
        };
        let corrupt = |reason: String| StoreError::CorruptRow {
            table: "conversation",
            key: id.to_string(),
            reason,
        };
        let revision: i64 = row.try_get(0).map_err(error)?;
        let body: String = row.try_get(1).map_err(error)?;
        Ok(Some(Conversation {
            id: id.clone(),
            revision: u64::try_from(revision)
                .map_err(|_| corrupt(format!("revision {revision}")))?,
            body: serde_json::from_str(&body).map_err(|e| corrupt(format!("body: {e}")))?,
            updated_at: row.try_get(2).map_err(error)?,
        }))
    }
}
