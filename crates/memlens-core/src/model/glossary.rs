//! What each number memlens shows means, in one sentence: the viewer's hover definitions of
//! the summary strip (`model::stats::DeviceStats`) and the state view (`state::StateNumbers`),
//! keyed by their field names (`memlens stats --json`'s keys).

/// `reserved_bytes − allocated_bytes`: shown beside the two it is computed from.
pub const RESERVED_MINUS_ALLOCATED: &str = "reserved_minus_allocated_bytes";

/// The definition of a metric, by field name.
pub fn definition(metric: &str) -> Option<&'static str> {
    Some(match metric {
        "reserved_bytes" => "Reserved: bytes of all segments the caching allocator holds from the device (cudaMalloc'd), used or not. What nvidia-smi counts for this process, minus the CUDA context and other allocators.",
        "allocated_bytes" => "Allocated: bytes of blocks handed to tensors (active_allocated), each rounded up to the allocator's block size.",
        "requested_bytes" => "Requested: bytes the tensors asked for (before rounding up to block sizes).",
        "active_bytes" => "Active: allocated bytes plus blocks freed by the program but still in use by a stream (pending free).",
        "pending_free_bytes" => "Pending free: blocks the program freed that a stream still uses (record_stream); they return to the pool when the stream's work is done.",
        "inactive_split_bytes" => "Inactive split: free bytes inside segments that also hold other blocks. They can serve only requests that fit in the free pieces; memory the allocator cannot hand back to the device without freeing the whole segment.",
        "inactive_bytes" => "Inactive: free bytes inside segments (reserved − active).",
        "largest_free_block_bytes" => "Largest free block: the largest single free block in any segment: the largest request that can be served without reserving more.",
        "fragmentation_pct" => "Fragmentation = 1 − largest free block ÷ free bytes in segments. High means the free memory is in many pieces, not that much memory is free: read it with the free bytes (reserved − allocated). 0 when nothing is free or all of it is one block.",
        "rounding_waste_bytes" => "Rounding waste: allocated minus requested: what rounding requests up to block sizes costs.",
        "timeline_peak_bytes" => "Timeline peak: the most memory live at once over the trace (the top of the Active Memory Timeline), including allocations made before the trace.",
        "peak_reserved_bytes" => "Peak reserved: the most memory the allocator held from the device at once over the trace.",
        "trace_entries" => "Trace entries: the events recorded for this device (alloc, free, segment and other actions); the ring buffer keeps the latest max_entries.",
        "segments" => "Segments / blocks: device allocations the caching allocator made, and the blocks they are split into.",
        "unplaced_allocations" => "Unplaced: allocations the trace frees that no segment of the time can hold (the segments were not recorded).",
        RESERVED_MINUS_ALLOCATED => "Reserved − allocated: memory the allocator holds but no tensor uses: free blocks in segments plus pending frees. Large values with high fragmentation are what expandable_segments addresses.",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::definition;

    #[test]
    fn every_summary_metric_is_defined() {
        // The summary strip's and the state view's numbers.
        for k in [
            "reserved_bytes",
            "allocated_bytes",
            "requested_bytes",
            "active_bytes",
            "pending_free_bytes",
            "inactive_split_bytes",
            "largest_free_block_bytes",
            "fragmentation_pct",
            "rounding_waste_bytes",
            "timeline_peak_bytes",
            "peak_reserved_bytes",
            "trace_entries",
            "segments",
            "unplaced_allocations",
            super::RESERVED_MINUS_ALLOCATED,
        ] {
            assert!(definition(k).is_some(), "no definition for {k}");
        }
        assert!(definition("fragmentation_pct")
            .is_some_and(|d| d.contains("1 − largest free block ÷ free bytes")));
        assert_eq!(definition("nope"), None);
    }
}
