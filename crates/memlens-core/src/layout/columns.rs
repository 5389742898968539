//! How timeline layouts travel (see [`crate::columns`]): the element columns as one table, the
//! pieces, totals and times as further columns, markers, regions, warnings and pools in the
//! header. The derived indices do not travel: [`TimelineLayout::from_parts`] rebuilds them.

use super::timeline::{Elements, TimelineLayout};
use crate::columns::{put, take, ColumnError, ColumnSink, ColumnSource, Columns};

crate::impl_columns! {
    Elements {
        columns [size_bytes, addr, version, start_x, end_x, alloc_row, free_row, stream, kind, stack, pool];
    }
}

impl Columns for TimelineLayout {
    fn pack(&self, sink: &mut impl ColumnSink) {
        self.elements.pack(sink);
        put(sink, "piece_start", &self.piece_start);
        put(sink, "piece_t0", &self.piece_t0);
        put(sink, "piece_y0", &self.piece_y0);
        put(sink, "total_bytes", &self.total_bytes);
        put(sink, "time_us", &self.time_us);
        sink.head("n_events", &self.n_events);
        sink.head("markers", &self.markers);
        sink.head("regions", &self.regions);
        sink.head("warnings", &self.warnings);
        sink.head("pools", &self.pools);
        sink.head("monotone", &self.is_monotone());
        sink.head("preview", &self.is_preview());
    }

    fn unpack(src: &mut impl ColumnSource) -> Result<Self, ColumnError> {
        let elements = Elements::unpack(src)?;
        let preview: bool = src.take_head("preview")?;
        TimelineLayout::from_parts(
            src.take_head("n_events")?,
            elements,
            take(src, "piece_start")?,
            take(src, "piece_t0")?,
            take(src, "piece_y0")?,
            take(src, "total_bytes")?,
            take(src, "time_us")?,
            src.take_head("markers")?,
            src.take_head("regions")?,
            src.take_head("warnings")?,
            src.take_head("pools")?,
            src.take_head("monotone")?,
        )
        .map(|l| l.with_preview(preview))
        .map_err(|e| ColumnError::Invalid(e.to_string()))
    }
}
