//! The newest screenshot of each agent, as taken from the dashboard: one PNG per agent,
//! replaced by the next one.

use super::db::{Row, args};
use super::{Result, Store};

/// What is known about a stored screenshot, without the picture.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScreenshotMeta {
    pub agent_id: String,
    pub width: i64,
    pub height: i64,
    pub bytes: i64,
    /// RFC 3339.
    pub taken_at: String,
    /// The user name that asked for it.
    pub taken_by: String,
}

impl Store {
    /// Keeps `png` as the agent's latest screenshot, replacing the one before.
    pub fn put_screenshot(&self, meta: &ScreenshotMeta, png: &[u8]) -> Result<()> {
        self.write_db(|c| {
            c.execute(
                "INSERT INTO screenshots (agent_id, png, width, height, taken_at, taken_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (agent_id) DO UPDATE SET png = excluded.png, width = excluded.width,
                 height = excluded.height, taken_at = excluded.taken_at, taken_by = excluded.taken_by",
                args![&meta.agent_id, png, meta.width, meta.height, &meta.taken_at, &meta.taken_by],
            )?;
            Ok(())
        })
    }

    pub fn screenshot_meta(&self, agent_id: &str) -> Result<Option<ScreenshotMeta>> {
        self.read_db(|c| {
            c.query_opt(
                "SELECT agent_id, width, height, length(png), taken_at, taken_by FROM screenshots WHERE agent_id = ?1",
                args![agent_id],
                meta_row,
            )
        })
    }

    /// The latest screenshot with its picture.
    pub fn screenshot(&self, agent_id: &str) -> Result<Option<(ScreenshotMeta, Vec<u8>)>> {
        self.read_db(|c| {
            c.query_opt(
                "SELECT agent_id, width, height, length(png), taken_at, taken_by, png FROM screenshots WHERE agent_id = ?1",
                args![agent_id],
                |r| Ok((meta_row(r)?, r.get(6)?)),
            )
        })
    }
}

/// The metadata columns, in the order both queries select them.
fn meta_row(r: &Row) -> Result<ScreenshotMeta> {
    Ok(ScreenshotMeta {
        agent_id: r.get(0)?,
        width: r.get(1)?,
        height: r.get(2)?,
        bytes: r.get(3)?,
        taken_at: r.get(4)?,
        taken_by: r.get(5)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_screenshot_per_agent_replaced_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.screenshot("pc-a").unwrap(), None);
        let mut meta = ScreenshotMeta {
            agent_id: "pc-a".into(),
            width: 2,
            height: 1,
            bytes: 3,
            taken_at: "2026-01-01T00:00:00Z".into(),
            taken_by: "root".into(),
        };
        store.put_screenshot(&meta, b"one").unwrap();
        meta.taken_by = "kim".into();
        meta.bytes = 5;
        store.put_screenshot(&meta, b"two!!").unwrap();
        let (got, png) = store.screenshot("pc-a").unwrap().unwrap();
        assert_eq!((got.clone(), png.as_slice()), (meta.clone(), &b"two!!"[..]));
        assert_eq!(store.screenshot_meta("pc-a").unwrap(), Some(meta));
        assert_eq!(store.screenshot_meta("pc-b").unwrap(), None);
    }
}
