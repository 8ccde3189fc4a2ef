//! WebService: the Insights page (deployment frequency, change failure rate, application
//! counts), from the data the insight-collection job keeps in the filestore.

use std::collections::{BTreeMap, HashMap};

use wisp_model::event::contains_labels;
use wisp_proto::model::{
    self, DeploymentStatus, InsightMetricsKind, InsightResolution, InsightResultType,
};
use wisp_proto::webservice::*;
use wisp_store::insight::{DeploymentData, InsightStore};

use super::{Authorized, WebApi};
use crate::error::ServiceError;

const DAY: i64 = 86_400;
/// Longest range served at once (upstream's console asks for a year at most).
const MAX_RANGE: i64 = 2 * 366 * DAY;

impl WebApi {
    /// Deployment frequency (deployments completed per day or month) or change failure
    /// rate (the share of them that failed), over `[range_from, range_to]`, for one
    /// application or for the project's deployments with the given labels.
    pub async fn get_insight_data(
        &self,
        caller: &Authorized,
        req: GetInsightDataRequest,
    ) -> Result<GetInsightDataResponse, ServiceError> {
        let kind = InsightMetricsKind::try_from(req.metrics_kind).map_err(|_| {
            ServiceError::InvalidArgument("invalid request: unknown metrics kind".into())
        })?;
        if !matches!(
            kind,
            InsightMetricsKind::DeploymentFrequency | InsightMetricsKind::ChangeFailureRate
        ) {
            return Err(ServiceError::Unimplemented(format!(
                "{} is not supported",
                kind.as_str_name()
            )));
        }
        if req.range_from <= 0 || req.range_to < req.range_from {
            return Err(ServiceError::InvalidArgument(
                "invalid request: range_from must be positive and not after range_to".into(),
            ));
        }
        if req.range_to - req.range_from > MAX_RANGE {
            return Err(ServiceError::InvalidArgument(
                "invalid request: the range is longer than two years".into(),
            ));
        }
        let monthly = req.resolution == InsightResolution::Monthly as i32;
        let store = InsightStore::new(self.stores.filestore.clone());
        let deployments = store
            .list_completed_deployments(caller.project_id(), req.range_from, req.range_to)
            .await
            .map_err(|e| ServiceError::store(e, "get insight data"))?;
        let labels: HashMap<String, String> = req.labels.clone();
        let selected = deployments.iter().filter(|d| {
            (req.application_id.is_empty() || d.app_id == req.application_id)
                && contains_labels(&d.labels.clone().into_iter().collect(), &labels)
        });

        // Every bucket of the range, so the chart has no gaps.
        let mut buckets: BTreeMap<i64, (u32, u32)> = BTreeMap::new();
        let mut t = bucket_start(req.range_from, monthly);
        while t <= req.range_to {
            buckets.insert(t, (0, 0));
            t = next_bucket(t, monthly);
        }
        for d in selected {
            let entry = buckets
                .entry(bucket_start(d.completed_at, monthly))
                .or_insert((0, 0));
            entry.0 += 1;
            if failed(d) {
                entry.1 += 1;
            }
        }
        let data_points = buckets
            .into_iter()
            .map(|(timestamp, (total, failures))| model::InsightDataPoint {
                timestamp,
                value: match kind {
                    InsightMetricsKind::ChangeFailureRate if total > 0 => {
                        failures as f32 / total as f32
                    }
                    InsightMetricsKind::ChangeFailureRate => 0.0,
                    _ => total as f32,
                },
            })
            .collect();
        Ok(GetInsightDataResponse {
            updated_at: crate::support::now_unix(),
            r#type: InsightResultType::Matrix as i32,
            vector: vec![],
            matrix: vec![model::InsightSampleStream {
                labels: HashMap::new(),
                data_points,
            }],
        })
    }

    /// The project's applications counted by kind and active status, as the collection
    /// job last recorded them.
    pub async fn get_insight_application_count(
        &self,
        caller: &Authorized,
        _req: GetInsightApplicationCountRequest,
    ) -> Result<GetInsightApplicationCountResponse, ServiceError> {
        let store = InsightStore::new(self.stores.filestore.clone());
        let Some(data) = store
            .get_applications(caller.project_id())
            .await
            .map_err(|e| ServiceError::store(e, "get insight application count"))?
        else {
            return Err(ServiceError::NotFound(
                "Application counts have not been collected yet".into(),
            ));
        };
        let mut counts: BTreeMap<(String, String), i32> = BTreeMap::new();
        for app in &data.applications {
            *counts
                .entry((app.kind.clone(), app.status.clone()))
                .or_default() += 1;
        }
        let counts = counts
            .into_iter()
            .map(|((kind, status), count)| model::InsightApplicationCount {
                labels: HashMap::from([
                    ("KIND".to_string(), kind),
                    ("ACTIVE_STATUS".to_string(), status),
                ]),
                count,
            })
            .collect();
        Ok(GetInsightApplicationCountResponse {
            updated_at: data.updated_at,
            counts,
        })
    }
}

fn failed(d: &DeploymentData) -> bool {
    d.complete_status == DeploymentStatus::DeploymentFailure.as_str_name()
}

/// The UTC day (or month) `t` falls in, as the unix time of its start.
fn bucket_start(t: i64, monthly: bool) -> i64 {
    let day = t.div_euclid(DAY) * DAY;
    if !monthly {
        return day;
    }
    let (y, m, _) = civil_from_days(t.div_euclid(DAY));
    days_from_civil(y, m, 1) * DAY
}

fn next_bucket(start: i64, monthly: bool) -> i64 {
    if !monthly {
        return start + DAY;
    }
    let (y, m, _) = civil_from_days(start.div_euclid(DAY));
    let (y, m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    days_from_civil(y, m, 1) * DAY
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_start_on_the_first() {
        // 2026-11-22T10:00:00Z
        let t = 1_795_341_600;
        assert_eq!(bucket_start(t, false), 1_795_305_600); // 2026-11-22
        assert_eq!(bucket_start(t, true), 1_793_491_200); // 2026-11-01
        assert_eq!(next_bucket(1_793_491_200, true), 1_796_083_200); // 2026-12-01
        assert_eq!(next_bucket(1_796_083_200, true), 1_798_761_600); // 2027-01-01
    }
}
