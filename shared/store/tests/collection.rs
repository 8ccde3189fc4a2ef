//! The typed layer over the embedded datastore: optimistic updates lose no write,
//! queries stay inside their project, cursors end empty.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use wisp_proto::model;
use wisp_store::collection::{Collection, ListOptions};
use wisp_store::entities::{pk, slot};
use wisp_store::{Datastore, StoreError};
use wisp_store_embedded::SqliteDatastore;

fn datastore(dir: &tempfile::TempDir) -> Arc<dyn Datastore> {
    Arc::new(SqliteDatastore::open(dir.path().join("wisp.db")).expect("open sqlite"))
}

fn deployment(id: &str, project: &str, piped: &str) -> model::Deployment {
    model::Deployment {
        id: id.into(),
        application_id: "app-1".into(),
        application_name: "app".into(),
        piped_id: piped.into(),
        project_id: project.into(),
        git_path: Some(model::ApplicationGitPath {
            repo: Some(model::ApplicationGitRepository {
                id: "repo".into(),
                ..Default::default()
            }),
            path: "apps/app".into(),
            ..Default::default()
        }),
        trigger: Some(model::DeploymentTrigger {
            commit: Some(model::Commit {
                hash: "abc".into(),
                message: "msg".into(),
                author: "me".into(),
                branch: "main".into(),
                created_at: 1,
                ..Default::default()
            }),
            timestamp: 1,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_updaters_of_one_deployment_lose_no_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let deployments: Collection<model::Deployment> = Collection::new(datastore(&dir));
    deployments
        .create(deployment("d-1", "p", "piped-1"))
        .await
        .expect("create");

    let mut tasks = Vec::new();
    for i in 0..50 {
        let deployments = deployments.clone();
        tasks.push(tokio::spawn(async move {
            deployments
                .update("p", "d-1", |d| {
                    d.metadata.insert(format!("writer-{i}"), i.to_string());
                    Ok(())
                })
                .await
        }));
    }
    for task in tasks {
        task.await.expect("join").expect("update");
    }
    let stored = deployments.get("p", "d-1").await.expect("get");
    assert_eq!(stored.metadata.len(), 50, "every writer's key survives");
    for i in 0..50 {
        assert_eq!(
            stored.metadata.get(&format!("writer-{i}")),
            Some(&i.to_string())
        );
    }
}

#[tokio::test]
async fn get_and_update_are_scoped_by_project() {
    let dir = tempfile::tempdir().expect("tempdir");
    let deployments: Collection<model::Deployment> = Collection::new(datastore(&dir));
    deployments
        .create(deployment("d-1", "p", "piped-1"))
        .await
        .expect("create");

    assert!(matches!(
        deployments.get("other", "d-1").await,
        Err(StoreError::NotFound(_))
    ));
    let res = deployments.update("other", "d-1", |d| {
        d.summary = "hijacked".into();
        Ok(())
    });
    assert!(matches!(res.await, Err(StoreError::NotFound(_))));
    assert_eq!(deployments.get("p", "d-1").await.expect("get").summary, "");
}

#[tokio::test]
async fn invalid_entity_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let deployments: Collection<model::Deployment> = Collection::new(datastore(&dir));
    let mut bad = deployment("d-1", "p", "piped-1");
    bad.application_id.clear();
    assert!(matches!(
        deployments.create(bad).await,
        Err(StoreError::InvalidArgument(_))
    ));
    assert!(matches!(
        deployments.get("p", "d-1").await,
        Err(StoreError::NotFound(_))
    ));

    deployments
        .create(deployment("d-1", "p", "piped-1"))
        .await
        .expect("create");
    let res = deployments.update("p", "d-1", |d| {
        d.application_id.clear();
        Ok(())
    });
    assert!(matches!(res.await, Err(StoreError::InvalidArgument(_))));
    assert_eq!(
        deployments
            .get("p", "d-1")
            .await
            .expect("get")
            .application_id,
        "app-1"
    );
}

#[tokio::test]
async fn open_deployments_index_pages_with_filter_and_ends_with_empty_cursor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let deployments: Collection<model::Deployment> = Collection::new(datastore(&dir));
    for i in 0..25 {
        let mut d = deployment(&format!("d-{i:02}"), "p", "piped-1");
        d.summary = if i % 2 == 0 {
            "even".into()
        } else {
            "odd".into()
        };
        deployments.create(d).await.expect("create");
    }
    // A completed one leaves the sparse index; one of another piped never enters it.
    deployments
        .update("p", "d-00", |d| {
            d.status = model::DeploymentStatus::DeploymentSuccess as i32;
            Ok(())
        })
        .await
        .expect("complete");
    deployments
        .create(deployment("x-1", "p", "piped-2"))
        .await
        .expect("create");

    let even = |d: &model::Deployment| d.summary == "even";
    let mut seen = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        let mut opts = ListOptions::new(
            slot::DEPLOYMENT_OPEN_BY_PIPED,
            pk::project_piped("p", "piped-1"),
        );
        opts.limit = 4;
        opts.cursor = cursor.clone();
        opts.filter = Some(&even);
        let page = deployments.list(opts).await.expect("list");
        pages += 1;
        seen.extend(page.items.iter().map(|d| d.id.clone()));
        if page.cursor.is_empty() {
            break;
        }
        assert_eq!(page.items.len(), 4, "only the last page may be short");
        cursor = page.cursor;
        assert!(pages < 20, "pagination must terminate");
    }
    // d-02, d-04, ..., d-24: 12 open even deployments, each exactly once.
    let expected: Vec<String> = (1..=12).map(|i| format!("d-{:02}", i * 2)).collect();
    seen.sort();
    assert_eq!(seen, expected);
    assert_eq!(pages, 3);
}

/// An update that changes nothing (a piped reporting the same state again) writes
/// nothing: the record keeps its version and `updated_at`.
#[tokio::test]
async fn an_update_that_changes_nothing_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ds = datastore(&dir);
    let deployments: Collection<model::Deployment> = Collection::new(ds.clone());
    let mut created = deployment("d-1", "p", "piped-1");
    created.labels = (0..8).map(|i| (format!("k{i}"), format!("v{i}"))).collect();
    let created = deployments.create(created).await.expect("create");
    let labels = created.labels.clone();

    let same = deployments
        .update("p", "d-1", |d| {
            // Rebuilt: another HashMap, another order.
            d.labels = labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            d.summary = String::new();
            Ok(())
        })
        .await
        .expect("update");
    assert_eq!(same, created);
    let record = ds
        .get(wisp_store::Kind::Deployment, "d-1")
        .await
        .expect("get");
    assert_eq!(record.version, 1, "an unchanged entity was written");

    let changed = deployments
        .update("p", "d-1", |d| {
            d.summary = "deployed".into();
            Ok(())
        })
        .await
        .expect("update");
    assert_eq!(changed.summary, "deployed");
    let record = ds
        .get(wisp_store::Kind::Deployment, "d-1")
        .await
        .expect("get");
    assert_eq!(record.version, 2);
}
