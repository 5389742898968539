//! The stack panel's frames, leading with the user's code: the user frame (core's rule,
//! `memlens_core::flame::user_frame`, as `FrameInfo::user`) first and highlighted, runs of
//! C++/interpreter frames folded into one line with their count that opens on click, files
//! shortened (`FrameInfo::short_file`) with the full line on hover, and a button copying the
//! stack as text.

use memlens_core::layout::context::{ElementContext, FrameInfo};
use wasm_bindgen::JsCast;
use yew::prelude::*;

/// Runs of at least this many native frames are folded.
const FOLD_AT: usize = 2;

/// One frame line: the short file and the rest of the text; the full line on hover.
fn frame_line(text: &str, info: Option<&FrameInfo>, lead: bool) -> Html {
    let (shown, user) = match info {
        Some(i) if !i.file.is_empty() && text.starts_with(i.file.as_str()) => {
            (format!("{}{}", i.short_file, &text[i.file.len()..]), i.user)
        }
        Some(i) => (text.to_string(), i.user),
        None => (text.to_string(), false),
    };
    let class = classes!(
        "frame",
        user.then_some("user-frame"),
        lead.then_some("lead")
    );
    let testid = if lead { "user-frame" } else { "frame" };
    html! { <div class={class} title={text.to_string()} data-testid={testid}>{ shown }</div> }
}

/// The stack as text: the element's head line, then its frames (what the copy button copies).
pub fn stack_text(c: &ElementContext) -> String {
    let mut t = format!("{} {} bytes, alive {}\n", c.label, c.size_bytes, c.alive);
    for n in &c.notes {
        t.push_str(n);
        t.push('\n');
    }
    for f in &c.frames {
        t.push_str(f);
        t.push('\n');
    }
    t
}

/// Copies `text` with the async clipboard API; false when the page may not.
pub fn copy_to_clipboard(text: &str) -> bool {
    let Some(w) = web_sys::window() else {
        return false;
    };
    let nav = js_sys::Reflect::get(&w, &"navigator".into()).ok();
    let clip = nav.and_then(|n| js_sys::Reflect::get(&n, &"clipboard".into()).ok());
    let write = clip.as_ref().and_then(|c| {
        js_sys::Reflect::get(c, &"writeText".into())
            .ok()?
            .dyn_into::<js_sys::Function>()
            .ok()
    });
    match (clip, write) {
        (Some(c), Some(f)) => f.call1(&c, &text.into()).is_ok(),
        _ => false,
    }
}

#[derive(Properties, PartialEq)]
pub struct FramesProps {
    pub context: ElementContext,
}

/// The frames of a pinned element.
#[function_component(StackFrames)]
pub fn stack_frames(p: &FramesProps) -> Html {
    let copied = use_state(|| None::<bool>);
    let c = &p.context;
    let on_copy = {
        let copied = copied.clone();
        let text = stack_text(c);
        Callback::from(move |_: MouseEvent| copied.set(Some(copy_to_clipboard(&text))))
    };
    let info = |i: usize| c.frame_info.get(i);
    let lead = c
        .frame_info
        .iter()
        .position(|i| i.user && !i.native)
        .and_then(|i| c.frames.get(i).map(|t| frame_line(t, info(i), true)));
    let native = |k: usize| info(k).is_some_and(|f| f.native);
    let mut body = Vec::new();
    let mut i = 0;
    while i < c.frames.len() {
        let run = (i..c.frames.len()).take_while(|&k| native(k)).count();
        if run >= FOLD_AT {
            // `<repeats N times>` lines are not frames.
            let count = (i..i + run)
                .filter(|&k| info(k).is_some_and(|f| !f.file.is_empty()))
                .count();
            body.push(html! {
                <details class="native-frames" data-testid="native-frames">
                    <summary>{ format!("{count} C++ frame{}", if count == 1 { "" } else { "s" }) }</summary>
                    { for c.frames.get(i..i + run).unwrap_or_default().iter().enumerate()
                        .map(|(j, t)| frame_line(t, info(i + j), false)) }
                </details>
            });
            i += run;
        } else {
            body.extend(c.frames.get(i).map(|t| frame_line(t, info(i), false)));
            i += 1;
        }
    }
    let copy_label = match *copied {
        Some(true) => "copied",
        Some(false) => "cannot copy here",
        None => "copy stack",
    };
    html! {
        <>
            <div class="frames-head">
                <button class="link" data-testid="copy-stack" title="copy this allocation and its stack as text"
                    data-copied={copied.map(|b| b.to_string())} onclick={on_copy}>{ copy_label }</button>
            </div>
            <div class="frames" data-testid="frames">
                { for lead }
                { for body }
            </div>
        </>
    }
}
