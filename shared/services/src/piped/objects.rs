//! Per-application objects kept in the filestore: live state, the latest analysis result
//! (v0) and plugin shared objects (v1).

use std::collections::BTreeMap;

use wisp_model::validate::Validate;
use wisp_proto::model::KubernetesResourceStateEvent;
use wisp_proto::pipedservice::*;
use wisp_store::StoreError;

use super::{PipedApi, PipedCaller};
use crate::error::ServiceError;

impl PipedApi {
    /// A full live-state snapshot of one of the piped's applications.
    pub async fn report_application_live_state(
        &self,
        caller: &PipedCaller,
        req: ReportApplicationLiveStateRequest,
    ) -> Result<ReportApplicationLiveStateResponse, ServiceError> {
        req.validate()?;
        let Some(mut snapshot) = req.snapshot else {
            return Err(ServiceError::InvalidArgument(
                "invalid request: invalid ReportApplicationLiveStateRequest.snapshot: value is required"
                    .into(),
            ));
        };
        self.check_application(caller, &snapshot.application_id)
            .await?;
        // The snapshot is stored under the application id alone: make sure it names the
        // owner it was checked against.
        snapshot.project_id = caller.project_id.clone();
        snapshot.piped_id = caller.piped_id.clone();
        self.stores
            .live_states
            .put(&snapshot)
            .await
            .map_err(|e| ServiceError::internal("failed to report application live state", e))?;
        Ok(ReportApplicationLiveStateResponse {})
    }

    /// Incremental Kubernetes resource events, patched into each application's stored
    /// snapshot.
    ///
    /// Deviation: upstream checks no ownership here. Events are grouped by application and
    /// each application must belong to the caller's piped; the events of any other
    /// application (another piped's, another project's, unknown) are skipped and their
    /// ids returned in `failed_ids`, as are events whose patch failed.
    pub async fn report_application_live_state_events(
        &self,
        caller: &PipedCaller,
        req: ReportApplicationLiveStateEventsRequest,
    ) -> Result<ReportApplicationLiveStateEventsResponse, ServiceError> {
        req.validate()?;
        let mut by_app: BTreeMap<String, Vec<KubernetesResourceStateEvent>> = BTreeMap::new();
        for event in req.kubernetes_events {
            by_app
                .entry(event.application_id.clone())
                .or_default()
                .push(event);
        }
        let mut failed_ids = Vec::new();
        for (app_id, events) in by_app {
            match self.check_application(caller, &app_id).await {
                Ok(()) => {}
                Err(err @ (ServiceError::PermissionDenied(_) | ServiceError::NotFound(_))) => {
                    tracing::warn!(app = %app_id, piped = %caller.piped_id, error = %wisp_store::error::chain(&err), "skipping live state events");
                    failed_ids.extend(events.into_iter().map(|e| e.id));
                    continue;
                }
                Err(other) => return Err(other),
            }
            if let Err(err) = self.stores.live_states.patch(&app_id, &events).await {
                tracing::warn!(app = %app_id, error = %wisp_store::error::chain(&err), "failed to patch live state");
                failed_ids.extend(events.into_iter().map(|e| e.id));
            }
        }
        Ok(ReportApplicationLiveStateEventsResponse { failed_ids })
    }

    /// Deprecated (v0): the latest analysis result of an application; `NotFound` if none.
    pub async fn get_latest_analysis_result(
        &self,
        caller: &PipedCaller,
        req: GetLatestAnalysisResultRequest,
    ) -> Result<GetLatestAnalysisResultResponse, ServiceError> {
        req.validate()?;
        self.check_application(caller, &req.application_id).await?;
        match self.stores.analysis_results.get(&req.application_id).await {
            Ok(result) => Ok(GetLatestAnalysisResultResponse {
                analysis_result: Some(result),
            }),
            Err(StoreError::NotFound(_)) => Err(ServiceError::NotFound(
                "the most recent analysis result is not found".into(),
            )),
            Err(e) => Err(ServiceError::store(
                e,
                "get the most recent analysis result",
            )),
        }
    }

    /// Deprecated (v0).
    pub async fn put_latest_analysis_result(
        &self,
        caller: &PipedCaller,
        req: PutLatestAnalysisResultRequest,
    ) -> Result<PutLatestAnalysisResultResponse, ServiceError> {
        req.validate()?;
        let Some(result) = req.analysis_result else {
            return Err(ServiceError::InvalidArgument(
                "invalid request: invalid PutLatestAnalysisResultRequest.analysis_result: value is required"
                    .into(),
            ));
        };
        self.check_application(caller, &req.application_id).await?;
        self.stores
            .analysis_results
            .put(&req.application_id, &result)
            .await
            .map_err(|e| ServiceError::store(e, "put the most recent analysis result"))?;
        Ok(PutLatestAnalysisResultResponse {})
    }

    /// A plugin's object for an application; `NotFound` when absent (v1 pipeds rely on it).
    pub async fn get_application_shared_object(
        &self,
        caller: &PipedCaller,
        req: GetApplicationSharedObjectRequest,
    ) -> Result<GetApplicationSharedObjectResponse, ServiceError> {
        req.validate()?;
        self.check_application(caller, &req.application_id).await?;
        match self
            .stores
            .shared_objects
            .get(&req.application_id, &req.plugin_name, &req.key)
            .await
        {
            Ok(object) => Ok(GetApplicationSharedObjectResponse { object }),
            Err(StoreError::NotFound(_)) => Err(ServiceError::NotFound(
                "the requested object was not found".into(),
            )),
            Err(e) => Err(ServiceError::store(e, "get application shared object")),
        }
    }

    pub async fn put_application_shared_object(
        &self,
        caller: &PipedCaller,
        req: PutApplicationSharedObjectRequest,
    ) -> Result<PutApplicationSharedObjectResponse, ServiceError> {
        req.validate()?;
        self.check_application(caller, &req.application_id).await?;
        self.stores
            .shared_objects
            .put(&req.application_id, &req.plugin_name, &req.key, req.object)
            .await
            .map_err(|e| ServiceError::store(e, "put application shared object"))?;
        Ok(PutApplicationSharedObjectResponse {})
    }
}
