//! The stack frames the simulated program records: an interned catalogue of frames and stacks,
//! and builders that assemble them the way torch's `CapturedTraceback` symbolizes a mixed
//! C++/Python stack (innermost first: allocator frames, ATen dispatch frames, the Python binding,
//! Python frames interleaved with interpreter frames, the C `main` chain, and the outermost
//! Python frames last; autograd-engine threads end in `__clone` with no Python frames).

use crate::rng::Rng;
use rustc_hash::FxHashMap;

/// One frame as torch writes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FrameDef {
    pub name: String,
    pub filename: String,
    pub line: i64,
}

/// Interned frames and stacks. Frames that differ only in `variant` are distinct objects with the
/// same text, as torch produces for two call sites in one C function.
#[derive(Debug, Clone, Default)]
pub struct Stacks {
    frames: Vec<FrameDef>,
    frame_ids: FxHashMap<(String, String, i64, u32), u32>,
    stacks: Vec<Vec<u32>>,
    stack_ids: FxHashMap<Vec<u32>, u32>,
}

impl Stacks {
    pub fn frame(&mut self, name: &str, filename: &str, line: i64, variant: u32) -> u32 {
        let key = (name.to_string(), filename.to_string(), line, variant);
        if let Some(&id) = self.frame_ids.get(&key) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(FrameDef {
            name: key.0.clone(),
            filename: key.1.clone(),
            line,
        });
        self.frame_ids.insert(key, id);
        id
    }

    pub fn stack(&mut self, frames: Vec<u32>) -> u32 {
        if let Some(&id) = self.stack_ids.get(&frames) {
            return id;
        }
        let id = self.stacks.len() as u32;
        self.stacks.push(frames.clone());
        self.stack_ids.insert(frames, id);
        id
    }

    pub fn frames_of(&self, stack: u32) -> &[u32] {
        self.stacks
            .get(stack as usize)
            .map_or(&[], |v| v.as_slice())
    }

    pub fn frame_def(&self, id: u32) -> Option<&FrameDef> {
        self.frames.get(id as usize)
    }

    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    pub fn stack_count(&self) -> usize {
        self.stacks.len()
    }
}

/// A Python frame: function, file, line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Py {
    pub func: String,
    pub file: String,
    pub line: i64,
}

pub fn py(func: &str, file: &str, line: i64) -> Py {
    Py {
        func: func.to_string(),
        file: file.to_string(),
        line,
    }
}

/// An ATen operator: name (as in `at::_ops::<name>`) and C++ argument list.
#[derive(Debug, Clone, Copy)]
pub struct Op {
    pub name: &'static str,
    pub sig: &'static str,
    /// Structured kernels allocate their output from `set_output_raw_strided`.
    pub structured: bool,
}

pub const T1: &str = "at::Tensor const&";
pub const T2: &str = "at::Tensor const&, at::Tensor const&";

pub const fn op(name: &'static str, sig: &'static str, structured: bool) -> Op {
    Op {
        name,
        sig,
        structured,
    }
}

/// Where the program lives and how its interpreter names its frames.
#[derive(Debug, Clone)]
pub struct Env {
    pub project: String,
    pub site_packages: String,
    /// Interpreter generation (0: 3.10-style frame names, 1: 3.12/3.13-style).
    pub style: u8,
}

impl Env {
    pub fn new(rng: &mut Rng) -> Env {
        let users = [
            "alice", "bob", "cheng", "dana", "emre", "fatima", "gus", "hiro", "ines", "jun",
        ];
        let projects = [
            "llm-train",
            "nanogpt",
            "assignment2-systems",
            "research",
            "lm-experiments",
            "ft-course",
        ];
        let user = rng.pick(&users, "user");
        let project = rng.pick(&projects, "proj");
        let (py, style) = rng.pick(
            &[("3.10", 0u8), ("3.11", 0), ("3.12", 1), ("3.13", 1)],
            ("3.11", 0),
        );
        let site_packages = if rng.chance(0.5) {
            format!("/home/{user}/miniconda3/envs/{project}/lib/python{py}/site-packages")
        } else {
            format!("/home/{user}/{project}/.venv/lib/python{py}/site-packages")
        };
        Env {
            project: format!("/home/{user}/{project}"),
            site_packages,
            style,
        }
    }

    /// A file of the user's project.
    pub fn user(&self, rel: &str) -> String {
        format!("{}/{rel}", self.project)
    }

    /// A file inside the installed torch package.
    pub fn torch(&self, rel: &str) -> String {
        format!("{}/torch/{rel}", self.site_packages)
    }

    /// `nn.Module.__call__` frames that wrap a module's `forward` (innermost first).
    pub fn module_call(&self) -> [Py; 2] {
        let m = self.torch("nn/modules/module.py");
        if self.style == 0 {
            [
                py("_call_impl", &m, 1527),
                py("_wrapped_call_impl", &m, 1518),
            ]
        } else {
            [
                py("_call_impl", &m, 1790),
                py("_wrapped_call_impl", &m, 1779),
            ]
        }
    }
}

const UNKNOWN: &str = "??";

/// Builds stacks into a [`Stacks`] catalogue.
pub struct Builder<'a> {
    pub st: &'a mut Stacks,
    pub env: &'a Env,
}

impl Builder<'_> {
    fn f(&mut self, out: &mut Vec<u32>, name: &str, file: &str) {
        let id = self.st.frame(name, file, 0, 0);
        out.push(id);
    }

    fn alloc_prefix(&mut self, out: &mut Vec<u32>) {
        self.f(out, "torch::unwind::unwind()", UNKNOWN);
        self.f(
            out,
            "torch::CapturedTraceback::gather(bool, bool, bool)",
            UNKNOWN,
        );
        self.f(
            out,
            "torch::cuda::(anonymous namespace)::gather_with_cpp()",
            "memory_snapshot.cpp",
        );
        self.f(
            out,
            "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)",
            "CUDACachingAllocator.cpp",
        );
        self.f(
            out,
            "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*)",
            "",
        );
        self.f(out, "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)", "");
        self.f(
            out,
            "at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)",
            UNKNOWN,
        );
        self.f(
            out,
            "at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>)",
            UNKNOWN,
        );
        self.f(
            out,
            "at::detail::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
            UNKNOWN,
        );
        self.f(
            out,
            "at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)",
            UNKNOWN,
        );
    }

    fn free_prefix(&mut self, out: &mut Vec<u32>) {
        self.f(out, "torch::unwind::unwind()", UNKNOWN);
        self.f(
            out,
            "torch::CapturedTraceback::gather(bool, bool, bool)",
            UNKNOWN,
        );
        self.f(
            out,
            "torch::cuda::(anonymous namespace)::gather_with_cpp()",
            "memory_snapshot.cpp",
        );
        self.f(
            out,
            "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free(c10::cuda::CUDACachingAllocator::Native::(anonymous namespace)::Block*)",
            "CUDACachingAllocator.cpp",
        );
        self.f(
            out,
            "c10::cuda::CUDACachingAllocator::Native::local_raw_delete(void*)",
            "CUDACachingAllocator.cpp",
        );
        self.f(out, "c10::StorageImpl::~StorageImpl()", "");
        self.f(
            out,
            "c10::intrusive_ptr<c10::StorageImpl, c10::detail::intrusive_target_default_null_type<c10::StorageImpl> >::reset_()",
            "",
        );
        self.f(out, "c10::TensorImpl::~TensorImpl()", UNKNOWN);
        self.f(
            out,
            "c10::TensorImpl::~TensorImpl() [clone .localalias]",
            "TensorImpl.cpp",
        );
    }

    /// The dispatcher frames of one operator call, innermost first.
    fn op_chain(&mut self, out: &mut Vec<u32>, o: Op, autograd: bool) {
        let (n, s) = (o.name, o.sig);
        let base = n.split('_').find(|p| !p.is_empty()).unwrap_or(n);
        if o.structured {
            self.f(
                out,
                &format!("at::(anonymous namespace)::structured_{base}_out_functional::set_output_raw_strided(long, c10::ArrayRef<long>, c10::ArrayRef<long>, c10::TensorOptions, c10::ArrayRef<at::Dimname>)"),
                "RegisterCUDA_0.cpp",
            );
            self.f(
                out,
                &format!("at::meta::structured_{base}::meta({s})"),
                UNKNOWN,
            );
        } else {
            self.f(out, &format!("at::native::{n}({s})"), UNKNOWN);
        }
        let wrapper = format!("at::(anonymous namespace)::wrapper_CUDA_{n}({s})");
        self.f(out, &wrapper, "RegisterCUDA_0.cpp");
        self.f(
            out,
            &format!("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor ({s}), &at::(anonymous namespace)::wrapper_CUDA_{n}>, at::Tensor, c10::guts::typelist::typelist<{s}> >, at::Tensor ({s})>::call(c10::OperatorKernel*, c10::DispatchKeySet, {s})"),
            "RegisterCUDA_0.cpp",
        );
        self.f(
            out,
            &format!("at::_ops::{n}::redispatch(c10::DispatchKeySet, {s})"),
            UNKNOWN,
        );
        if autograd {
            let vt = format!("VariableType_{}.cpp", n.len() % 5);
            self.f(out, &format!("torch::autograd::VariableType::(anonymous namespace)::{n}(c10::DispatchKeySet, {s})"), &vt);
            self.f(
                out,
                &format!("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor (c10::DispatchKeySet, {s}), &torch::autograd::VariableType::(anonymous namespace)::{n}>, at::Tensor, c10::guts::typelist::typelist<c10::DispatchKeySet, {s}> >, at::Tensor (c10::DispatchKeySet, {s})>::call(c10::OperatorKernel*, c10::DispatchKeySet, {s})"),
                &vt,
            );
        }
        self.f(out, &format!("at::_ops::{n}::call({s})"), UNKNOWN);
    }

    /// Python frames (innermost first) interleaved with the interpreter frames between them; the
    /// last `top` Python frames follow the C `main` chain, as torch appends unmatched frames.
    fn python(&mut self, out: &mut Vec<u32>, frames: &[Py], top: usize) {
        let split = frames.len().saturating_sub(top);
        let (inner, outer) = frames.split_at(split);
        let style = self.env.style;
        for (i, p) in inner.iter().enumerate() {
            out.push(self.st.frame(&p.func, &p.file, p.line, 0));
            // One `_PyEval_EvalFrameDefault` object per call site, as symbolization gives.
            let v = (p.line % 3) as u32;
            out.push(self.st.frame("_PyEval_EvalFrameDefault", UNKNOWN, 0, v));
            let next = inner.get(i + 1).or(outer.first());
            let Some(next) = next else { break };
            if next.func == "_call_impl" || next.func == "_wrapped_call_impl" {
                let n = if style == 0 {
                    "PyMethod_New"
                } else {
                    "method_vectorcall"
                };
                self.f(out, n, UNKNOWN);
            } else if p.func == "_wrapped_call_impl" {
                self.f(out, "_PyObject_Call_Prepend", UNKNOWN);
                self.f(
                    out,
                    if style == 0 {
                        "PyType_GetModule"
                    } else {
                        "slot_tp_call"
                    },
                    UNKNOWN,
                );
                self.f(out, "_PyObject_MakeTpCall", UNKNOWN);
            } else if i + 1 < inner.len() {
                self.f(out, "_PyFunction_Vectorcall", UNKNOWN);
            }
        }
        let base: &[&str] = if style == 0 {
            &[
                "PyEval_EvalCode",
                "PyRun_StringFlags",
                "_PyRun_SimpleFileObject",
                "_PyRun_AnyFileObject",
                "Py_RunMain",
                "Py_BytesMain",
                "__libc_init_first",
                "__libc_start_main",
                "_start",
            ]
        } else {
            &[
                "PyEval_EvalCode",
                "run_eval_code_obj",
                "run_mod",
                "pyrun_file",
                "_PyRun_SimpleFileObject",
                "_PyRun_AnyFileObject",
                "pymain_run_file_obj",
                "pymain_run_file",
                "Py_RunMain",
                "pymain_main",
                "Py_BytesMain",
                "__libc_init_first",
                "__libc_start_main",
                "_start",
            ]
        };
        for b in base {
            self.f(out, b, UNKNOWN);
        }
        for p in outer {
            out.push(self.st.frame(&p.func, &p.file, p.line, 0));
        }
    }

    fn engine_base(&mut self, out: &mut Vec<u32>) {
        self.f(
            out,
            "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)",
            UNKNOWN,
        );
        self.f(out, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", UNKNOWN);
        self.f(
            out,
            "torch::autograd::Engine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)",
            UNKNOWN,
        );
        self.f(
            out,
            "torch::autograd::python::PythonEngine::thread_init(int, std::shared_ptr<torch::autograd::ReadyQueue> const&, bool)",
            "",
        );
        self.f(
            out,
            "std::error_code::default_error_condition() const",
            UNKNOWN,
        );
        self.f(out, "pthread_condattr_setpshared", UNKNOWN);
        self.f(out, "__clone", UNKNOWN);
    }

    /// An allocation made by Python code: `ops` innermost first, `binding` the `THPVariable_*`
    /// entry point, `frames` the Python stack innermost first.
    pub fn alloc_py(&mut self, ops: &[Op], binding: &str, frames: &[Py]) -> u32 {
        let mut out = Vec::with_capacity(64);
        self.alloc_prefix(&mut out);
        for o in ops {
            self.op_chain(&mut out, *o, true);
        }
        self.f(
            &mut out,
            &format!("torch::autograd::THPVariable_{binding}(_object*, _object*, _object*)"),
            "python_torch_functions_0.cpp",
        );
        self.f(
            &mut out,
            if self.env.style == 0 {
                "cfunction_call"
            } else {
                "PyObject_Vectorcall"
            },
            UNKNOWN,
        );
        self.python(&mut out, frames, 2);
        self.st.stack(out)
    }

    /// An allocation in the autograd engine's device thread, inside backward node `node`.
    pub fn alloc_engine(&mut self, ops: &[Op], node: &str) -> u32 {
        let mut out = Vec::with_capacity(40);
        self.alloc_prefix(&mut out);
        for o in ops {
            self.op_chain(&mut out, *o, false);
        }
        self.f(
            &mut out,
            &format!("torch::autograd::generated::{node}::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
            "Functions.cpp",
        );
        self.f(
            &mut out,
            "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
            "function.h",
        );
        self.f(
            &mut out,
            "torch::autograd::call_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&)",
            "engine.cpp",
        );
        self.engine_base(&mut out);
        self.st.stack(out)
    }

    /// A gradient summed into the engine's input buffer (two paths reach one tensor).
    pub fn alloc_accumulate(&mut self) -> u32 {
        let mut out = Vec::with_capacity(40);
        self.alloc_prefix(&mut out);
        self.op_chain(
            &mut out,
            op(
                "add_Tensor",
                "at::Tensor const&, at::Tensor const&, c10::Scalar const&",
                true,
            ),
            false,
        );
        self.f(
            &mut out,
            "torch::autograd::InputBuffer::add(unsigned long, at::Tensor, std::optional<c10::Stream> const&, std::optional<c10::Stream> const&)",
            "input_buffer.cpp",
        );
        self.engine_base(&mut out);
        self.st.stack(out)
    }

    /// A tensor freed when its last Python reference goes (at `frames[0]`).
    pub fn free_py(&mut self, frames: &[Py]) -> u32 {
        let mut out = Vec::with_capacity(64);
        self.free_prefix(&mut out);
        self.f(
            &mut out,
            "THPVariable_subclass_clear(THPVariable*)",
            "python_variable.cpp",
        );
        self.f(&mut out, "THPVariable_subclass_dealloc(_object*)", UNKNOWN);
        self.python(&mut out, frames, 2);
        self.st.stack(out)
    }

    /// `torch.cuda.empty_cache()` called from `frames` (the context of its `segment_free`s).
    pub fn empty_cache(&mut self, frames: &[Py]) -> u32 {
        let mut out = Vec::with_capacity(48);
        self.f(&mut out, "torch::unwind::unwind()", UNKNOWN);
        self.f(
            &mut out,
            "torch::CapturedTraceback::gather(bool, bool, bool)",
            UNKNOWN,
        );
        self.f(
            &mut out,
            "torch::cuda::(anonymous namespace)::gather_with_cpp()",
            "memory_snapshot.cpp",
        );
        self.f(
            &mut out,
            "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::emptyCache(std::pair<unsigned long long, unsigned long long>)",
            "CUDACachingAllocator.cpp",
        );
        self.f(
            &mut out,
            "THCPModule_emptyCache(_object*, _object*)",
            "Module.cpp",
        );
        self.f(&mut out, "cfunction_vectorcall_NOARGS", UNKNOWN);
        self.python(&mut out, frames, 2);
        self.st.stack(out)
    }

    /// A saved tensor released after backward node `node` ran.
    pub fn free_saved(&mut self, node: &str) -> u32 {
        let mut out = Vec::with_capacity(24);
        self.free_prefix(&mut out);
        self.f(
            &mut out,
            "torch::autograd::SavedVariable::reset_data()",
            "saved_variable.cpp",
        );
        self.f(
            &mut out,
            &format!("torch::autograd::generated::{node}::release_variables()"),
            "Functions.h",
        );
        self.engine_base(&mut out);
        self.st.stack(out)
    }

    /// A gradient the engine consumed (its input buffer dropped).
    pub fn free_engine_temp(&mut self) -> u32 {
        let mut out = Vec::with_capacity(24);
        self.free_prefix(&mut out);
        self.f(
            &mut out,
            "std::vector<at::Tensor, std::allocator<at::Tensor> >::~vector()",
            UNKNOWN,
        );
        self.engine_base(&mut out);
        self.st.stack(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_interned_and_mixed_like_torch() {
        let mut st = Stacks::default();
        let env = Env::new(&mut Rng::new(3, 0));
        let mut b = Builder {
            st: &mut st,
            env: &env,
        };
        let m = env.module_call();
        let frames = [
            py("forward", &env.user("model.py"), 101),
            m[0].clone(),
            m[1].clone(),
            py("main", &env.user("train.py"), 40),
            py("<module>", &env.user("train.py"), 99),
        ];
        let mm = op("mm", T2, true);
        let a = b.alloc_py(&[mm], "mm", &frames);
        let a2 = b.alloc_py(&[mm], "mm", &frames);
        assert_eq!(a, a2);
        let e = b.alloc_engine(&[mm], "MmBackward0");
        assert_ne!(a, e);
        let fr = st.frames_of(a);
        let first = st.frame_def(fr[0]).map(|f| f.name.clone());
        assert_eq!(first.as_deref(), Some("torch::unwind::unwind()"));
        let last = st.frame_def(fr[fr.len() - 1]).map(|f| f.name.clone());
        assert_eq!(last.as_deref(), Some("<module>"));
        let last_e = st
            .frame_def(*st.frames_of(e).last().unwrap_or(&0))
            .map(|f| f.name.clone());
        assert_eq!(last_e.as_deref(), Some("__clone"));
        assert!(fr.len() > 30, "{} frames", fr.len());
    }
}
