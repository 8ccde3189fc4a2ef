//! How a record is laid out as a DynamoDB item (cursors: `wisp_store::cursor`).
//!
//! | attribute | type | value |
//! |---|---|---|
//! | `pk` | S | kind (`Deployment`) — table partition key |
//! | `sk` | S | record id — table sort key |
//! | `project_id` | S | |
//! | `version` | N | optimistic-concurrency counter |
//! | `data` | B | protobuf bytes |
//! | `expires_at` | N | unix seconds; the table's TTL attribute; absent = never |
//! | `gNpk` | S | `<kind>#<index pk>`; absent when slot N is `None` (sparse GSI `gsiN`) |
//! | `gNsk` | S | `<index sk>\0<id>`; absent when slot N is `None` |
//!
//! `\0` sorts below every other character, so the byte order of `gNsk` is the `(sk, id)`
//! order the trait requires, ties broken by id, in both directions; an index sort key
//! therefore must not contain `\0`.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use wisp_store::datastore::{INDEX_SLOTS, IndexKey, Kind, Record};
use wisp_store::error::{Result, StoreError};

pub const PK: &str = "pk";
pub const SK: &str = "sk";
pub const PROJECT_ID: &str = "project_id";
pub const VERSION: &str = "version";
pub const DATA: &str = "data";
pub const EXPIRES_AT: &str = "expires_at";
pub const GSI_NAMES: [&str; INDEX_SLOTS] = ["gsi0", "gsi1", "gsi2"];
pub const GSI_PK: [&str; INDEX_SLOTS] = ["g0pk", "g1pk", "g2pk"];
pub const GSI_SK: [&str; INDEX_SLOTS] = ["g0sk", "g1sk", "g2sk"];

/// Separates the index sort key from the id in `gNsk`.
pub const SEP: char = '\0';

/// Records are refused above this estimated item size (DynamoDB's hard limit is 400 KB).
pub const MAX_ITEM_BYTES: usize = 350 * 1024;
/// DynamoDB's limits on key attribute values (table and GSI keys alike).
pub const MAX_PARTITION_KEY_BYTES: usize = 2048;
pub const MAX_SORT_KEY_BYTES: usize = 1024;

pub type Item = HashMap<String, AttributeValue>;

/// The partition value of slot N's GSI for `kind`.
pub fn gsi_pk(kind: Kind, pk: &str) -> String {
    format!("{kind}#{pk}")
}

/// The sort value of slot N's GSI: `(sk, id)` as one string.
pub fn gsi_sk(sk: &str, id: &str) -> String {
    let mut out = String::with_capacity(sk.len() + 1 + id.len());
    out.push_str(sk);
    out.push(SEP);
    out.push_str(id);
    out
}

pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The table key of `(kind, id)`.
pub fn key(kind: Kind, id: &str) -> Item {
    HashMap::from([(PK.to_string(), s(kind.as_str())), (SK.to_string(), s(id))])
}

/// Whether `id` can be a record id here: non-empty and within the sort-key limit.
pub fn check_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(StoreError::InvalidArgument("record id is empty".into()));
    }
    if id.len() > MAX_SORT_KEY_BYTES {
        return Err(StoreError::InvalidArgument(format!(
            "record id is {} bytes; DynamoDB allows at most {MAX_SORT_KEY_BYTES}",
            id.len()
        )));
    }
    Ok(())
}

/// Whether an id could name a stored record (reads of impossible ids are NotFound
/// without asking DynamoDB, which would refuse the key).
pub fn possible_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_SORT_KEY_BYTES
}

/// Checks one index entry of a record being written; returns `(gNpk, gNsk)`.
fn index_attributes(kind: Kind, slot: usize, id: &str, key: &IndexKey) -> Result<(String, String)> {
    if key.sk.contains(SEP) {
        return Err(StoreError::InvalidArgument(format!(
            "index slot {slot} sort key contains a NUL character"
        )));
    }
    let pk = gsi_pk(kind, &key.pk);
    if pk.len() > MAX_PARTITION_KEY_BYTES {
        return Err(StoreError::InvalidArgument(format!(
            "index slot {slot} partition key is {} bytes; at most {MAX_PARTITION_KEY_BYTES} \
             including the kind prefix",
            pk.len()
        )));
    }
    let sk = gsi_sk(&key.sk, id);
    if sk.len() > MAX_SORT_KEY_BYTES {
        return Err(StoreError::InvalidArgument(format!(
            "index slot {slot} sort key and id are {} bytes together; at most \
             {MAX_SORT_KEY_BYTES}",
            sk.len()
        )));
    }
    Ok((pk, sk))
}

/// DynamoDB's item size: attribute names plus values (numbers counted generously).
fn item_size(item: &Item) -> usize {
    item.iter()
        .map(|(name, value)| {
            name.len()
                + match value {
                    AttributeValue::S(v) => v.len(),
                    AttributeValue::N(v) => v.len() / 2 + 2,
                    AttributeValue::B(v) => v.as_ref().len(),
                    _ => 0,
                }
        })
        .sum()
}

/// The item for `record` stored at `version`.
pub fn to_item(kind: Kind, record: Record, version: u64) -> Result<Item> {
    check_id(&record.id)?;
    let mut item = key(kind, &record.id);
    for (slot, index) in record.indexes.iter().enumerate() {
        if let Some(index) = index {
            let (pk, sk) = index_attributes(kind, slot, &record.id, index)?;
            item.insert(GSI_PK[slot].to_string(), s(pk));
            item.insert(GSI_SK[slot].to_string(), s(sk));
        }
    }
    item.insert(PROJECT_ID.to_string(), s(record.project_id));
    item.insert(VERSION.to_string(), n(version));
    item.insert(DATA.to_string(), AttributeValue::B(Blob::new(record.data)));
    if let Some(expires_at) = record.expires_at {
        item.insert(EXPIRES_AT.to_string(), n(expires_at));
    }
    let size = item_size(&item);
    if size > MAX_ITEM_BYTES {
        return Err(StoreError::InvalidArgument(format!(
            "{kind} {} is {size} bytes as a DynamoDB item; records must stay under \
             {MAX_ITEM_BYTES} (keep large payloads in the filestore)",
            item_string(&item, SK).unwrap_or_default()
        )));
    }
    Ok(item)
}

/// Why an item read back from DynamoDB is not a valid record.
#[derive(Debug, thiserror::Error)]
pub enum ItemError {
    #[error("attribute {0} is missing")]
    Missing(&'static str),
    #[error("attribute {0} has the wrong type")]
    WrongType(&'static str),
    #[error("attribute {0} is invalid: {1}")]
    Invalid(&'static str, String),
}

fn item_string<'a>(item: &'a Item, name: &'static str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v),
        _ => None,
    }
}

fn get_string(item: &Item, name: &'static str) -> std::result::Result<String, ItemError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v.clone()),
        Some(_) => Err(ItemError::WrongType(name)),
        None => Err(ItemError::Missing(name)),
    }
}

fn get_number<T: std::str::FromStr>(
    item: &Item,
    name: &'static str,
) -> std::result::Result<Option<T>, ItemError>
where
    T::Err: std::fmt::Display,
{
    match item.get(name) {
        Some(AttributeValue::N(v)) => v
            .parse()
            .map(Some)
            .map_err(|e: T::Err| ItemError::Invalid(name, format!("{v}: {e}"))),
        Some(_) => Err(ItemError::WrongType(name)),
        None => Ok(None),
    }
}

/// The stored version of an item.
pub fn version_of(item: &Item) -> std::result::Result<u64, ItemError> {
    get_number(item, VERSION)?.ok_or(ItemError::Missing(VERSION))
}

/// A record is live while `expires_at` is absent or still in the future.
pub fn is_live(item: &Item, now: i64) -> std::result::Result<bool, ItemError> {
    Ok(get_number::<i64>(item, EXPIRES_AT)?.is_none_or(|t| t > now))
}

fn decode(kind: Kind, item: Item) -> std::result::Result<Record, ItemError> {
    let stored_kind = get_string(&item, PK)?;
    if stored_kind != kind.as_str() {
        return Err(ItemError::Invalid(
            PK,
            format!("{stored_kind} is not {kind}"),
        ));
    }
    let id = get_string(&item, SK)?;
    let mut indexes: [Option<IndexKey>; INDEX_SLOTS] = Default::default();
    for (slot, index) in indexes.iter_mut().enumerate() {
        let (pk_name, sk_name) = (GSI_PK[slot], GSI_SK[slot]);
        *index = match (item.contains_key(pk_name), item.contains_key(sk_name)) {
            (false, false) => None,
            (true, false) => return Err(ItemError::Missing(sk_name)),
            (false, true) => return Err(ItemError::Missing(pk_name)),
            (true, true) => {
                let pk = get_string(&item, pk_name)?;
                let sk = get_string(&item, sk_name)?;
                let pk = pk
                    .strip_prefix(kind.as_str())
                    .and_then(|rest| rest.strip_prefix('#'))
                    .ok_or_else(|| ItemError::Invalid(pk_name, format!("no {kind}# prefix")))?;
                let sk = sk
                    .strip_suffix(id.as_str())
                    .and_then(|rest| rest.strip_suffix(SEP))
                    .ok_or_else(|| ItemError::Invalid(sk_name, "no id suffix".into()))?;
                Some(IndexKey::new(pk, sk))
            }
        };
    }
    let data = match item.get(DATA) {
        Some(AttributeValue::B(v)) => v.as_ref().to_vec(),
        Some(_) => return Err(ItemError::WrongType(DATA)),
        None => return Err(ItemError::Missing(DATA)),
    };
    Ok(Record {
        project_id: get_string(&item, PROJECT_ID)?,
        version: version_of(&item)?,
        data,
        indexes,
        expires_at: get_number(&item, EXPIRES_AT)?,
        id,
    })
}

/// The record an item holds.
pub fn from_item(kind: Kind, item: Item) -> Result<Record> {
    let id = item_string(&item, SK).unwrap_or("?").to_string();
    decode(kind, item)
        .map_err(|e| StoreError::internal_from(format!("corrupt DynamoDB item {kind} {id}"), e))
}

pub fn corrupt(kind: Kind, id: &str, e: ItemError) -> StoreError {
    StoreError::internal_from(format!("corrupt DynamoDB item {kind} {id}"), e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            id: "id-1".into(),
            project_id: "p".into(),
            version: 0,
            data: vec![0, 1, 2, 255],
            indexes: [
                Some(IndexKey::new("proj#piped", "00000000000000000042")),
                None,
                Some(IndexKey::new("", "")),
            ],
            expires_at: Some(1_700_000_000),
        }
    }

    #[test]
    fn items_round_trip() {
        let item = to_item(Kind::Command, sample(), 3).expect("item");
        assert_eq!(
            item.get("g0pk"),
            Some(&AttributeValue::S("Command#proj#piped".into()))
        );
        assert_eq!(
            item.get("g0sk"),
            Some(&AttributeValue::S("00000000000000000042\0id-1".into()))
        );
        assert!(!item.contains_key("g1pk") && !item.contains_key("g1sk"));
        let back = from_item(Kind::Command, item).expect("record");
        assert_eq!(
            back,
            Record {
                version: 3,
                ..sample()
            }
        );
    }

    #[test]
    fn composite_sort_keys_order_like_pairs() {
        let pairs = [
            ("", "z"),
            ("a", "b"),
            ("a", "ba"),
            ("a", "c"),
            ("a!", "a"),
            ("ab", ""),
            ("b", "a"),
        ];
        let mut composite: Vec<String> = pairs.iter().map(|(s, i)| gsi_sk(s, i)).collect();
        composite.sort();
        let want: Vec<String> = pairs.iter().map(|(s, i)| gsi_sk(s, i)).collect();
        assert_eq!(composite, want);
    }

    #[test]
    fn bad_records_are_refused() {
        let mut r = sample();
        r.indexes[1] = Some(IndexKey::new("p", "has\0nul"));
        assert!(matches!(
            to_item(Kind::Event, r, 1),
            Err(StoreError::InvalidArgument(_))
        ));
        let mut r = sample();
        r.data = vec![0; MAX_ITEM_BYTES];
        assert!(matches!(
            to_item(Kind::Event, r, 1),
            Err(StoreError::InvalidArgument(_))
        ));
        let mut r = sample();
        r.id = String::new();
        assert!(matches!(
            to_item(Kind::Event, r, 1),
            Err(StoreError::InvalidArgument(_))
        ));
        let mut r = sample();
        r.indexes[0] = Some(IndexKey::new("p", "x".repeat(1020)));
        assert!(matches!(
            to_item(Kind::Event, r, 1),
            Err(StoreError::InvalidArgument(_))
        ));
    }

    #[test]
    fn corrupt_items_are_internal_errors() {
        let mut item = to_item(Kind::Command, sample(), 1).expect("item");
        item.remove("g0sk");
        assert!(matches!(
            from_item(Kind::Command, item),
            Err(StoreError::Internal { .. })
        ));
        let item = to_item(Kind::Command, sample(), 1).expect("item");
        assert!(matches!(
            from_item(Kind::Event, item),
            Err(StoreError::Internal { .. })
        ));
    }
}

/// Items come back from DynamoDB. A record written as an item reads back as the same
/// record (or is refused as an invalid argument before it is written); an item with an
/// attribute removed, retyped or garbled is a corrupt item (`Internal`), never a different
/// record. Each target prints how many inputs reach each assertion. (Cursors, which come
/// from clients, are `wisp_store::cursor`'s, tested there.)
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;
    use wisp_reach::Reach;

    fn attribute() -> impl Strategy<Value = AttributeValue> {
        let leaf = prop_oneof![
            ".{0,40}".prop_map(AttributeValue::S),
            prop_oneof!["-?[0-9]{1,25}".boxed(), ".{0,12}".boxed(),].prop_map(AttributeValue::N),
            proptest::collection::vec(any::<u8>(), 0..64)
                .prop_map(|b| AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(b))),
            any::<bool>().prop_map(AttributeValue::Bool),
        ];
        leaf.prop_recursive(2, 8, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(AttributeValue::L),
                proptest::collection::hash_map(".{0,8}", inner, 0..4).prop_map(AttributeValue::M),
            ]
        })
    }

    /// Attribute names decoding reads.
    fn known_names() -> Vec<&'static str> {
        [PK, SK, DATA, VERSION, PROJECT_ID, EXPIRES_AT]
            .into_iter()
            .chain(GSI_PK)
            .chain(GSI_SK)
            .collect()
    }

    fn index_key() -> impl Strategy<Value = Option<IndexKey>> {
        proptest::option::of(
            (".{0,20}", prop_oneof![".{0,20}", "[0-9]{20}"])
                .prop_map(|(pk, sk)| IndexKey::new(pk, sk)),
        )
    }

    fn record() -> impl Strategy<Value = Record> {
        (
            prop_oneof![8 => "[A-Za-z0-9-]{1,40}", 1 => ".{0,40}"],
            ".{0,20}",
            proptest::collection::vec(any::<u8>(), 0..128),
            [index_key(), index_key(), index_key()],
            proptest::option::of(any::<i64>()),
        )
            .prop_map(|(id, project_id, data, indexes, expires_at)| Record {
                id,
                project_id,
                version: 0,
                data,
                indexes,
                expires_at,
            })
    }

    /// One change to a valid item.
    #[derive(Debug, Clone)]
    enum Change {
        Remove(prop::sample::Index),
        Retype(prop::sample::Index, AttributeValue),
        /// Another kind's partition key.
        OtherKind,
        /// An attribute decoding does not read.
        Extra(String, AttributeValue),
    }

    fn change() -> impl Strategy<Value = Change> {
        prop_oneof![
            2 => any::<prop::sample::Index>().prop_map(Change::Remove),
            2 => (any::<prop::sample::Index>(), attribute()).prop_map(|(i, v)| Change::Retype(i, v)),
            1 => Just(Change::OtherKind),
            1 => ("x_[a-z]{1,8}", attribute()).prop_map(|(n, v)| Change::Extra(n, v)),
        ]
    }

    fn is_corrupt(e: &StoreError) -> bool {
        matches!(e, StoreError::Internal { context, .. } if context.starts_with("corrupt DynamoDB item"))
    }

    #[test]
    fn records_round_trip_and_changed_items_are_corrupt() {
        let inputs = (record(), any::<u64>(), proptest::option::of(change()));
        Reach::new("dynamodb items: records and changed items", file!())
            .at_least("record read back as written", 0.2)
            .at_least("changed item: corrupt (Internal)", 0.2)
            .at_least("changed item: the same record", 0.05)
            .in_all_at_least(0.9)
            .run(inputs, |(record, version, change)| {
                let item = match to_item(Kind::Application, record.clone(), version) {
                    Ok(item) => item,
                    Err(e) => {
                        prop_assert!(matches!(e, StoreError::InvalidArgument(_)), "{:?}", e);
                        return Ok(Some("refused record: InvalidArgument"));
                    }
                };
                prop_assert_eq!(version_of(&item).ok(), Some(version));
                let expected = Record { version, ..record };
                let Some(change) = change else {
                    prop_assert_eq!(from_item(Kind::Application, item).ok(), Some(expected));
                    return Ok(Some("record read back as written"));
                };
                let mut item = item;
                let mut names: Vec<String> = item.keys().cloned().collect();
                names.sort();
                let mut expected = expected;
                let touched = match change {
                    // Without `expires_at` a record never expires: the same record, but
                    // for that.
                    Change::Remove(i) if names[i.index(names.len())] == EXPIRES_AT => {
                        item.remove(EXPIRES_AT);
                        expected.expires_at = None;
                        false
                    }
                    Change::Remove(i) => {
                        item.remove(&names[i.index(names.len())]);
                        true
                    }
                    // Another type (another value of the same type is another record).
                    Change::Retype(i, value) => {
                        let name = &names[i.index(names.len())];
                        let retyped = item.get(name).map(std::mem::discriminant)
                            != Some(std::mem::discriminant(&value));
                        if retyped {
                            item.insert(name.clone(), value);
                        }
                        retyped
                    }
                    Change::OtherKind => {
                        item.insert(PK.into(), s(Kind::Deployment.as_str()));
                        true
                    }
                    Change::Extra(name, value) => {
                        item.insert(name, value);
                        false
                    }
                };
                Ok(Some(match from_item(Kind::Application, item) {
                    Ok(back) => {
                        // Only a change decoding cannot see, or one that decodes to the
                        // same value (a number written another way), leaves the record.
                        prop_assert_eq!(back, expected);
                        "changed item: the same record"
                    }
                    Err(e) => {
                        prop_assert!(touched, "an unread attribute broke the item: {:?}", e);
                        prop_assert!(is_corrupt(&e), "{:?}", e);
                        "changed item: corrupt (Internal)"
                    }
                }))
            });
    }

    #[test]
    fn any_item_decodes_or_is_corrupt() {
        let name = prop_oneof![
            proptest::sample::select(known_names()).prop_map(String::from),
            ".{0,12}"
        ];
        let items = proptest::collection::hash_map(name, attribute(), 0..12);
        Reach::new("dynamodb items: arbitrary items", file!())
            .in_all_at_least(1.0)
            .run(items, |item| {
                let _ = version_of(&item);
                let _ = is_live(&item, 0);
                Ok(Some(match from_item(Kind::Application, item.clone()) {
                    // What decodes writes back to an item that decodes the same.
                    Ok(record) => {
                        match to_item(Kind::Application, record.clone(), record.version) {
                            Ok(item) => {
                                prop_assert_eq!(
                                    from_item(Kind::Application, item).ok(),
                                    Some(record)
                                );
                                "decoded, and written back the same"
                            }
                            // E.g. an index sort key holding a NUL: refused, not stored.
                            Err(e) => {
                                prop_assert!(
                                    matches!(e, StoreError::InvalidArgument(_)),
                                    "{:?}",
                                    e
                                );
                                "decoded; refused as a record to write"
                            }
                        }
                    }
                    Err(e) => {
                        prop_assert!(is_corrupt(&e), "{:?}", e);
                        "corrupt (Internal)"
                    }
                }))
            });
    }
}
