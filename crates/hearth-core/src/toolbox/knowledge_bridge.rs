//! The knowledge base as the gateway's knowledge tools see it: library and document ids as text,
//! refusals as sentences the model reads.

use std::sync::Arc;

use super::gateway::{KnowledgeAccess, KnowledgeDoc, KnowledgeHit, KnowledgeRefusal};
use crate::knowledge::{DocumentId, KnowledgeService, LibraryId};

pub struct KnowledgeBridge(pub Arc<KnowledgeService>);

fn library_ids(ids: &[String]) -> Vec<LibraryId> {
    ids.iter().filter_map(|s| s.parse().ok()).map(LibraryId).collect()
}

impl KnowledgeAccess for KnowledgeBridge {
    fn search(&self, libraries: &[String], query: &str, limit: usize) -> Result<Vec<KnowledgeHit>, KnowledgeRefusal> {
        let hits = self.0.search(&library_ids(libraries), query, limit)?;
        Ok(hits
            .into_iter()
            .map(|h| KnowledgeHit { library: h.library_id.0.to_string(), document_id: h.document_id.0.to_string(), title: h.path, snippet: h.snippet, score: h.score })
            .collect())
    }

    fn read(&self, libraries: &[String], document_id: &str, max_bytes: usize) -> Result<KnowledgeDoc, KnowledgeRefusal> {
        let id = document_id.parse().map(DocumentId).map_err(|_| KnowledgeRefusal::BadDocumentId(document_id.into()))?;
        let d = self.0.read_document(&library_ids(libraries), id, max_bytes)?;
        Ok(KnowledgeDoc { library: d.library_id.0.to_string(), document_id: d.id.0.to_string(), title: d.path, text: d.text, truncated: d.truncated })
    }
}
