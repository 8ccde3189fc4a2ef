//! The latest successful analysis result per application (v0), JSON at
//! `latest-analysis-result/<appID>.json`.

use std::sync::Arc;

use wisp_proto::model::AnalysisResult;

use crate::error::Result;
use crate::filestore::{Filestore, PutCondition};
use crate::support::{check_segment, from_json, to_json};

pub fn analysis_result_path(app_id: &str) -> String {
    format!("latest-analysis-result/{app_id}.json")
}

#[derive(Clone)]
pub struct AnalysisResultStore {
    filestore: Arc<dyn Filestore>,
}

impl std::fmt::Debug for AnalysisResultStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnalysisResultStore")
            .finish_non_exhaustive()
    }
}

impl AnalysisResultStore {
    pub fn new(filestore: Arc<dyn Filestore>) -> Self {
        AnalysisResultStore { filestore }
    }

    /// `NotFound` when the application has none.
    pub async fn get(&self, app_id: &str) -> Result<AnalysisResult> {
        check_segment("application id", app_id)?;
        let path = analysis_result_path(app_id);
        let object = self.filestore.get(&path).await?;
        from_json(&format!("analysis result {path}"), &object.data)
    }

    pub async fn put(&self, app_id: &str, result: &AnalysisResult) -> Result<()> {
        check_segment("application id", app_id)?;
        let data = to_json("analysis result", result)?;
        self.filestore
            .put(&analysis_result_path(app_id), data, PutCondition::Any)
            .await?;
        Ok(())
    }
}
