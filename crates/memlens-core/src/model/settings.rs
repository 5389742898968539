//! The allocator's settings as a backend records them in `allocator_settings`: the configuration
//! string under `PYTORCH_CUDA_ALLOC_CONF` (CUDA), a backend's own `PYTORCH_<NAME>_ALLOC_CONF`
//! (Cambricon `MLU`, `MUSA`, ...) or the device-generic `PYTORCH_ALLOC_CONF` (XPU), plus parsed
//! fields (`expandable_segments`, `max_split_size`, ...). The one reader of those settings:
//! the state history's split rule, the verdict's fixes and the viewer's device names ask here.

use super::Snapshot;

/// The configuration string and the variable it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocConf<'a> {
    /// `PYTORCH_CUDA_ALLOC_CONF`, `PYTORCH_ALLOC_CONF`, `PYTORCH_MLU_ALLOC_CONF`, ...
    pub var: &'a str,
    /// What it was set to (often empty).
    pub text: &'a str,
}

/// CUDA's variable: named in advice when the file names none.
pub const CUDA_CONF_VAR: &str = "PYTORCH_CUDA_ALLOC_CONF";

/// The backend a configuration variable belongs to: `Some("cuda")` for
/// `PYTORCH_CUDA_ALLOC_CONF`, `Some("")` for the generic `PYTORCH_ALLOC_CONF`, `None` for any
/// other key.
fn backend_of(var: &str) -> Option<&str> {
    let mid = var.strip_prefix("PYTORCH_")?.strip_suffix("ALLOC_CONF")?;
    if mid.is_empty() {
        return Some("");
    }
    let name = mid.strip_suffix('_')?;
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(name)
}

/// One `key:value` of a configuration string (`expandable_segments:True,max_split_size_mb:64`).
fn conf_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.split(',')
        .filter_map(|kv| kv.split_once(':'))
        .filter(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
        .next_back()
}

impl Snapshot {
    /// The allocator configuration string, under whichever backend's variable it was recorded.
    pub fn alloc_conf(&self) -> Option<AllocConf<'_>> {
        let map = self.allocator_settings.as_ref()?.as_object()?;
        map.iter().find_map(|(k, v)| {
            backend_of(k)?;
            Some(AllocConf {
                var: k,
                text: v.as_str().unwrap_or(""),
            })
        })
    }

    /// The variable advice should name: the file's own, else CUDA's.
    pub fn alloc_conf_var(&self) -> &str {
        self.alloc_conf().map_or(CUDA_CONF_VAR, |c| c.var)
    }

    /// The device type in torch's spelling (`cuda`, `mlu`, `musa`, ...), from the configuration
    /// variable; `device` for the generic `PYTORCH_ALLOC_CONF` (XPU writes it; the schema does
    /// not say which backend); `cuda` when the file records no settings (torch's default).
    pub fn device_type(&self) -> String {
        match self.alloc_conf().and_then(|c| backend_of(c.var)) {
            Some("") => "device".to_string(),
            Some(name) => name.to_ascii_lowercase(),
            None => "cuda".to_string(),
        }
    }

    /// `cuda:0`, `mlu:1`, `device:0`: how the viewer names a device.
    pub fn device_name(&self, device: u32) -> String {
        format!("{}:{device}", self.device_type())
    }

    /// A setting as a parsed field, else from the configuration string.
    fn setting(&self, field: &str, conf_key: &str) -> Option<serde_json::Value> {
        if let Some(v) = self.allocator_settings.as_ref().and_then(|s| s.get(field)) {
            return Some(v.clone());
        }
        let text = conf_value(self.alloc_conf()?.text, conf_key)?;
        Some(serde_json::from_str(text).unwrap_or_else(|_| text.into()))
    }

    /// `expandable_segments` was on (a bool, `True`, or 1).
    pub fn expandable_segments(&self) -> bool {
        self.setting("expandable_segments", "expandable_segments")
            .is_some_and(|v| {
                v.as_bool() == Some(true)
                    || v.as_str().is_some_and(|s| s.eq_ignore_ascii_case("true"))
                    || v.as_i64() == Some(1)
            })
    }

    /// `max_split_size` in bytes (torch: blocks at least this large are never split); `None`
    /// when unset (torch records -1).
    pub fn max_split_bytes(&self) -> Option<u64> {
        if let Some(v) = self
            .allocator_settings
            .as_ref()
            .and_then(|s| s.get("max_split_size"))
        {
            return v.as_i64().filter(|&v| v > 0).map(|v| v as u64);
        }
        let mb = conf_value(self.alloc_conf()?.text, "max_split_size_mb")?;
        mb.parse::<u64>().ok().map(|mb| mb << 20)
    }
}

#[cfg(test)]
mod tests {
    fn snap(settings: &str) -> crate::Snapshot {
        let doc =
            format!(r#"{{"segments":[],"device_traces":[[]],"allocator_settings":{settings}}}"#);
        crate::load(doc.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn each_backend_names_its_devices() {
        let cuda = snap(r#"{"PYTORCH_CUDA_ALLOC_CONF":"","expandable_segments":false}"#);
        assert_eq!(cuda.device_name(0), "cuda:0");
        assert_eq!(cuda.alloc_conf_var(), "PYTORCH_CUDA_ALLOC_CONF");
        let mlu = snap(r#"{"PYTORCH_MLU_ALLOC_CONF":"expandable_segments:True"}"#);
        assert_eq!(mlu.device_name(1), "mlu:1");
        assert_eq!(mlu.alloc_conf_var(), "PYTORCH_MLU_ALLOC_CONF");
        assert!(mlu.expandable_segments());
        let xpu = snap(r#"{"PYTORCH_ALLOC_CONF":"max_split_size_mb:128"}"#);
        assert_eq!(xpu.device_name(0), "device:0");
        assert_eq!(
            xpu.alloc_conf().map(|c| (c.var, c.text)),
            Some(("PYTORCH_ALLOC_CONF", "max_split_size_mb:128"))
        );
        assert_eq!(xpu.max_split_bytes(), Some(128 << 20));
        assert!(!xpu.expandable_segments());
        let none = crate::load(br#"{"segments":[],"device_traces":[[]]}"#)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(none.device_name(0), "cuda:0");
        assert_eq!(none.alloc_conf_var(), "PYTORCH_CUDA_ALLOC_CONF");
        assert_eq!(none.max_split_bytes(), None);
    }

    #[test]
    fn parsed_fields_win_over_the_string() {
        let s = snap(
            r#"{"PYTORCH_CUDA_ALLOC_CONF":"expandable_segments:True","expandable_segments":false,"max_split_size":-1}"#,
        );
        assert!(!s.expandable_segments());
        assert_eq!(s.max_split_bytes(), None);
        // Not a configuration variable.
        let other = snap(r#"{"PYTORCH_ALLOC_CONFX":"a","XPYTORCH_CUDA_ALLOC_CONF":"b"}"#);
        assert_eq!(other.alloc_conf(), None);
    }
}
