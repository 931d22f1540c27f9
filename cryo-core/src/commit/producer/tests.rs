use iceberg::spec::{SnapshotRetention, TableMetadata};

use super::staged::{main_retention, new_snapshot_id};

#[test]
fn snapshot_ids_are_positive() {
    let md_json = r#"{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1","location":"file:///t","last-sequence-number":0,"last-updated-ms":1,"last-column-id":1,"current-schema-id":0,"schemas":[{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","required":true,"type":"long"}]}],"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[]}],"last-partition-id":999,"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],"properties":{},"snapshots":[],"snapshot-log":[],"metadata-log":[]}"#;
    let md: TableMetadata = serde_json::from_str(md_json).unwrap();
    for _ in 0..1000 {
        assert!(new_snapshot_id(&md) > 0);
    }
    assert_eq!(
        main_retention("t", &md).unwrap(),
        SnapshotRetention::branch(None, None, None)
    );
}
