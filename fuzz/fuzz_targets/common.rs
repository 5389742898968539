//! What the fuzz targets share: the loader fed in pieces.

use memlens_core::{DecodeError, Loader, Snapshot};

/// The loader's model after pushing `data` in pieces of `sizes` (cycled; at least one of them
/// not 0), with the file's length `total` told or not.
pub fn load_in_pieces(
    data: &[u8],
    sizes: &[usize],
    total: Option<u64>,
) -> Result<Snapshot, DecodeError> {
    let mut l = Loader::new(total);
    let (mut pos, mut i) = (0usize, 0usize);
    while pos < data.len() {
        let n = sizes[i % sizes.len()].min(data.len() - pos);
        i += 1;
        l.push(&data[pos..pos + n])?;
        pos += n;
    }
    l.finish()
}
