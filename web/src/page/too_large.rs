//! The prompt for a file refused for its size (`crate::worker::limit`): what the whole file
//! would need against what the worker may hold, and an offer to open its last N events (N as
//! many as fit, editable), which opens it again with `#range=last:N`.

use crate::wire::protocol::TooLarge;
use memlens_core::layout::axis::format_bytes;
use web_sys::HtmlInputElement;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct Props {
    pub name: String,
    pub offer: TooLarge,
    /// The part chosen: the last N events.
    pub on_open: Callback<u64>,
    pub on_dismiss: Callback<MouseEvent>,
}

/// The banner of a refused file.
#[function_component(TooLargePrompt)]
pub fn too_large_prompt(p: &Props) -> Html {
    let input = use_node_ref();
    let o = &p.offer;
    let text = format!(
        "{} ({}) is too large to open whole here: its ~{:.0} events would need about {} of the viewer's memory, more than the {} a browser tab's decoder can hold.",
        p.name,
        format_bytes(o.file_bytes),
        o.entries,
        format_bytes(o.estimated_bytes),
        format_bytes(o.limit_bytes),
    );
    let open = {
        let (input, on_open) = (input.clone(), p.on_open.clone());
        Callback::from(move |_: MouseEvent| {
            let n = input
                .cast::<HtmlInputElement>()
                .and_then(|i| i.value().trim().parse::<u64>().ok())
                .filter(|&n| n > 0);
            if let Some(n) = n {
                on_open.emit(n);
            }
        })
    };
    let fits = o.last_fits > 0.0;
    html! {
        <div class="banner-error" role="alert" data-testid="too-large" data-estimated-bytes={o.estimated_bytes.to_string()} data-last-fits={o.last_fits.to_string()}>
            <span>{ text }</span>
            if fits {
                <span>{ " Open its last " }
                    <input ref={input} type="number" min="1" data-testid="too-large-last" value={o.last_fits.to_string()} />
                    { " events " }
                    <button data-testid="open-last" onclick={open}>{ "open" }</button>
                    { " (or write part of it with `memlens slice FILE --last N -o part.pickle`)" }
                </span>
            } else {
                <span>{ " Write part of it with `memlens slice FILE --last N -o part.pickle`, or use the CLI." }</span>
            }
            <button class="link" onclick={p.on_dismiss.clone()}>{ "dismiss" }</button>
        </div>
    }
}
