//! Main-thread entry point: mounts the Yew app on `<body>`.

fn main() {
    yew::Renderer::<memlens_web::page::app::App>::new().render();
}
