//! Main-thread entry point: mounts the Yew app on `<body>`.

fn main() {
    yew::Renderer::<memlens_web::app::App>::new().render();
}
