//! Images a user attaches: validated by decoding (not by trusting a file name or media type), with
//! limits on bytes and pixels so a decompression bomb is refused before it is expanded, downscaled to
//! a size models handle well, and given a small thumbnail for the UI.

use std::io::Cursor;

use image::{DynamicImage, ImageFormat, ImageReader, Limits};

/// Largest attachment file accepted.
pub const MAX_IMAGE_FILE_BYTES: usize = 20 * 1024 * 1024;
/// Largest decoded image (width × height): 64 megapixels. Larger headers are refused before decoding.
pub const MAX_IMAGE_PIXELS: u64 = 64_000_000;
/// Most memory the decoder may allocate.
pub const MAX_DECODE_ALLOC_BYTES: u64 = 512 * 1024 * 1024;
/// Longest side sent to a model; larger images are downscaled (vision models downscale anyway, and
/// the bytes travel base64 inside every later request of the conversation).
pub const MODEL_MAX_SIDE: u32 = 1568;
/// Longest side of a UI thumbnail.
pub const THUMBNAIL_MAX_SIDE: u32 = 160;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImageError {
    #[error("{name} is {size_mib} MiB; images up to {} MiB can be attached.", MAX_IMAGE_FILE_BYTES / (1024 * 1024))]
    TooLarge { name: String, size_mib: usize },
    #[error("{name} is not an image Hearth can read (PNG, JPEG, GIF or WebP).")]
    UnknownFormat { name: String },
    #[error("{name} is {width}×{height} pixels; images up to {} megapixels can be attached.", MAX_IMAGE_PIXELS / 1_000_000)]
    TooManyPixels { name: String, width: u32, height: u32 },
    #[error("{name} could not be decoded: {detail}")]
    Corrupt { name: String, detail: String },
    #[error("The attachment {name} says it is {claimed} but its content is {}; it was not sent.", actual.unwrap_or("not an image Hearth can read"))]
    Mislabelled { name: String, claimed: String, actual: Option<&'static str> },
}

/// An image ready to send: re-encoded, within the model size, with a thumbnail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedImage {
    pub name: String,
    pub media_type: String,
    pub bytes: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// PNG thumbnail.
    pub thumbnail_png: Vec<u8>,
    pub downscaled: bool,
}

fn limits() -> Limits {
    let mut l = Limits::default();
    // Per-side bound: a square of MAX_IMAGE_PIXELS; the product is checked after reading the header.
    let side = (MAX_IMAGE_PIXELS as f64).sqrt() as u32 * 4;
    l.max_image_width = Some(side);
    l.max_image_height = Some(side);
    l.max_alloc = Some(MAX_DECODE_ALLOC_BYTES);
    l
}

/// Validate, downscale and thumbnail one attachment.
pub fn prepare(name: &str, bytes: &[u8]) -> Result<PreparedImage, ImageError> {
    if bytes.len() > MAX_IMAGE_FILE_BYTES {
        return Err(ImageError::TooLarge { name: name.into(), size_mib: bytes.len().div_ceil(1024 * 1024) });
    }
    let format = image::guess_format(bytes).map_err(|_| ImageError::UnknownFormat { name: name.into() })?;
    if !matches!(format, ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Gif | ImageFormat::WebP) {
        return Err(ImageError::UnknownFormat { name: name.into() });
    }
    let corrupt = |e: image::ImageError| ImageError::Corrupt { name: name.into(), detail: e.to_string() };
    // The header alone, read without the per-side limit: a claimed size above it must be named
    // as what it is ("… pixels"), not as a decoding failure. Nothing is allocated for pixels here.
    let (width, height) = ImageReader::with_format(Cursor::new(bytes), format).into_dimensions().map_err(corrupt)?;
    if u64::from(width) * u64::from(height) > MAX_IMAGE_PIXELS {
        return Err(ImageError::TooManyPixels { name: name.into(), width, height });
    }
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(limits());
    let decoded = reader.decode().map_err(|e| match e {
        image::ImageError::Limits(_) => ImageError::TooManyPixels { name: name.into(), width, height },
        other => corrupt(other),
    })?;

    let downscaled = width.max(height) > MODEL_MAX_SIDE;
    let model_image = if downscaled { decoded.resize(MODEL_MAX_SIDE, MODEL_MAX_SIDE, image::imageops::FilterType::Lanczos3) } else { decoded.clone() };
    // Photos stay JPEG (small); everything else becomes PNG (lossless, keeps transparency).
    let (out_format, media_type) = if format == ImageFormat::Jpeg { (ImageFormat::Jpeg, "image/jpeg") } else { (ImageFormat::Png, "image/png") };
    let bytes = encode(&model_image, out_format).map_err(corrupt)?;
    let thumb = decoded.thumbnail(THUMBNAIL_MAX_SIDE, THUMBNAIL_MAX_SIDE);
    let thumbnail_png = encode(&thumb, ImageFormat::Png).map_err(corrupt)?;
    Ok(PreparedImage {
        name: name.into(),
        media_type: media_type.into(),
        width: model_image.width(),
        height: model_image.height(),
        bytes,
        thumbnail_png,
        downscaled,
    })
}

/// The check at a runtime's door for an image a request carries: within the size bound, and the
/// bytes are what the media type says. (The app's images come from [`prepare`]; the runtime contract
/// takes any bytes, so a runtime checks again before it sends them to a model.)
pub fn check_attachment(name: &str, media_type: &str, bytes: &[u8]) -> Result<(), ImageError> {
    if bytes.len() > MAX_IMAGE_FILE_BYTES {
        return Err(ImageError::TooLarge { name: name.into(), size_mib: bytes.len().div_ceil(1024 * 1024) });
    }
    let actual = image::guess_format(bytes).ok().map(|f| f.to_mime_type());
    if actual != Some(media_type) {
        return Err(ImageError::Mislabelled { name: name.into(), claimed: media_type.into(), actual });
    }
    Ok(())
}

fn encode(img: &DynamicImage, format: ImageFormat) -> Result<Vec<u8>, image::ImageError> {
    let mut out = Cursor::new(Vec::new());
    let img = if format == ImageFormat::Jpeg { DynamicImage::ImageRgb8(img.to_rgb8()) } else { img.clone() };
    img.write_to(&mut out, format)?;
    Ok(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        encode(&DynamicImage::ImageRgba8(image::RgbaImage::from_pixel(w, h, image::Rgba([10, 20, 30, 255]))), ImageFormat::Png).unwrap()
    }

    #[test]
    fn a_small_png_passes_through_with_a_thumbnail() {
        let p = prepare("a.png", &png(40, 20)).unwrap();
        assert_eq!((p.width, p.height, p.media_type.as_str(), p.downscaled), (40, 20, "image/png", false));
        assert_eq!(image::guess_format(&p.thumbnail_png).unwrap(), ImageFormat::Png);
        let thumb = image::load_from_memory(&p.thumbnail_png).unwrap();
        assert!(thumb.width() <= THUMBNAIL_MAX_SIDE);
    }

    #[test]
    fn a_large_image_is_downscaled_for_the_model() {
        let p = prepare("big.png", &png(3000, 1000)).unwrap();
        assert!(p.downscaled);
        assert_eq!(p.width, MODEL_MAX_SIDE);
        assert_eq!(p.height, 523);
        let thumb = image::load_from_memory(&p.thumbnail_png).unwrap();
        assert_eq!(thumb.width(), THUMBNAIL_MAX_SIDE);
    }

    #[test]
    fn corrupt_and_unknown_files_are_refused_with_a_sentence() {
        let mut bytes = png(10, 10);
        bytes.truncate(bytes.len() / 2);
        let e = prepare("cut.png", &bytes).unwrap_err();
        assert!(matches!(e, ImageError::Corrupt { .. }), "{e}");
        assert_eq!(prepare("notes.txt", b"hello world").unwrap_err(), ImageError::UnknownFormat { name: "notes.txt".into() });
        assert!(prepare("notes.txt", b"hello").unwrap_err().to_string().contains("PNG, JPEG, GIF or WebP"));
    }

    #[test]
    fn a_decompression_bomb_is_refused_before_decoding() {
        // A tiny PNG whose header claims 20000×20000 pixels (400 MP): refused from the header alone.
        let mut bytes = png(1, 1);
        // IHDR width/height live at bytes 16..24; rewrite them and fix the chunk CRC.
        bytes[16..20].copy_from_slice(&20_000u32.to_be_bytes());
        bytes[20..24].copy_from_slice(&20_000u32.to_be_bytes());
        let crc = crc32(&bytes[12..29]);
        bytes[29..33].copy_from_slice(&crc.to_be_bytes());
        let e = prepare("bomb.png", &bytes).unwrap_err();
        assert!(matches!(e, ImageError::TooManyPixels { width: 20_000, height: 20_000, .. }), "{e}");
    }

    #[test]
    fn a_png_claiming_100000_by_100000_is_named_by_its_size_not_as_undecodable() {
        // Beyond the decoder's per-side limit too: the header is read without it.
        let bytes = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/images/claims-100000x100000.png"));
        let e = prepare("claims.png", bytes).unwrap_err();
        assert_eq!(e, ImageError::TooManyPixels { name: "claims.png".into(), width: 100_000, height: 100_000 });
        assert!(e.to_string().starts_with("claims.png is 100000×100000 pixels; images up to"), "{e}");
    }

    #[test]
    fn an_attachment_must_be_what_its_media_type_says() {
        let ok = png(2, 1);
        assert_eq!(check_attachment("a.png", "image/png", &ok), Ok(()));
        let e = check_attachment("a.png", "image/jpeg", &ok).unwrap_err();
        assert!(e.to_string().contains("says it is image/jpeg but its content is image/png"), "{e}");
        assert!(check_attachment("a.png", "image/png", b"hello").unwrap_err().to_string().contains("not an image"));
        assert!(matches!(check_attachment("h.png", "image/png", &vec![0; MAX_IMAGE_FILE_BYTES + 1]), Err(ImageError::TooLarge { .. })));
    }

    #[test]
    fn an_oversized_file_is_refused_by_size() {
        let e = prepare("huge.png", &vec![0u8; MAX_IMAGE_FILE_BYTES + 1]).unwrap_err();
        assert!(e.to_string().contains("images up to 20 MiB"), "{e}");
    }

    #[test]
    fn jpeg_stays_jpeg() {
        let jpg = encode(&DynamicImage::ImageRgb8(image::RgbImage::new(8, 8)), ImageFormat::Jpeg).unwrap();
        assert_eq!(prepare("p.jpg", &jpg).unwrap().media_type, "image/jpeg");
    }

    fn crc32(data: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }
}
