//! Image intake of a 24-megapixel JPEG: validate by decoding, downscale for the model, thumbnail.
//! Prints figures; asserts nothing about speed. `cargo bench -p hearth-core --bench images`.

use std::time::Instant;

use hearth_core::images;

/// A 24 MP photo (6000 × 4000), as a phone or camera makes.
const WIDTH: u32 = 6000;
const HEIGHT: u32 = 4000;
const RUNS: usize = 5;

fn main() {
    let photo = image::RgbImage::from_fn(WIDTH, HEIGHT, |x, y| image::Rgb([(x % 256) as u8, (y % 256) as u8, ((x ^ y) % 256) as u8]));
    let mut jpeg = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(photo).write_to(&mut jpeg, image::ImageFormat::Jpeg).expect("encode");
    let bytes = jpeg.into_inner();
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let t0 = Instant::now();
        last = Some(images::prepare("photo.jpg", &bytes).expect("a valid photo is accepted"));
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    let p = last.expect("ran");
    println!("Image intake: {WIDTH}×{HEIGHT} JPEG, {:.1} MB", bytes.len() as f64 / 1e6);
    println!("  validate + downscale + thumbnail: min {:.0} / median {:.0} / max {:.0} ms ({RUNS} runs)", times[0], times[RUNS / 2], times[RUNS - 1]);
    println!("  sent to the model: {}×{} {} ({:.0} KB); thumbnail {:.1} KB", p.width, p.height, p.media_type, p.bytes.len() as f64 / 1e3, p.thumbnail_png.len() as f64 / 1e3);
}
