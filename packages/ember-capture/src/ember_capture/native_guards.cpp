// ember_capture's native guard checks: many tensors' metadata, or many modules' hook dicts, in
// one call (Note [Native guards] in native.py). Built and loaded by native.py; every function
// answers False when it cannot show that the Python checks would pass.
#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Device.h>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

// One record per tensor, packed as int64s in a bytes object:
// [dtype, device type, device index, requires_grad, ndim, sizes..., strides...]
PyObject* make_spec(PyObject*, PyObject* records) {
  PyObject* seq = PySequence_Fast(records, "records must be a sequence");
  if (!seq) return nullptr;
  std::vector<int64_t> out;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* rec = PySequence_Fast_GET_ITEM(seq, i);
    PyObject *dtype, *device, *sizes, *strides;
    int requires_grad;
    if (!PyArg_ParseTuple(rec, "OOOOp", &dtype, &device, &sizes, &strides, &requires_grad)) { Py_DECREF(seq); return nullptr; }
    if (!THPDtype_Check(dtype) || !THPDevice_Check(device) || !PyTuple_Check(sizes) || !PyTuple_Check(strides)
        || PyTuple_GET_SIZE(sizes) != PyTuple_GET_SIZE(strides)) {
      Py_DECREF(seq);
      PyErr_SetString(PyExc_TypeError, "a record is (dtype, device, sizes, strides, requires_grad)");
      return nullptr;
    }
    c10::Device dev = ((THPDevice*)device)->device;
    Py_ssize_t ndim = PyTuple_GET_SIZE(sizes);
    out.push_back((int64_t)((THPDtype*)dtype)->scalar_type);
    out.push_back((int64_t)dev.type());
    out.push_back((int64_t)dev.index());
    out.push_back(requires_grad);
    out.push_back(ndim);
    for (PyObject* t : {sizes, strides})
      for (Py_ssize_t d = 0; d < ndim; d++) {
        int64_t v = PyLong_AsLongLong(PyTuple_GET_ITEM(t, d));
        if (v == -1 && PyErr_Occurred()) { Py_DECREF(seq); return nullptr; }
        out.push_back(v);
      }
  }
  Py_DECREF(seq);
  return PyBytes_FromStringAndSize((const char*)out.data(), (Py_ssize_t)(out.size() * sizeof(int64_t)));
}

bool tensor_matches(PyObject* obj, const int64_t*& p, const int64_t* end) {
  if (end - p < 5) return false;
  const at::Tensor& t = THPVariable_Unpack(obj);
  int64_t ndim = p[4];
  const int64_t* rec = p;
  p += 5 + 2 * ndim;
  if (p > end) return false;
  if (t.layout() != c10::kStrided || (int64_t)t.scalar_type() != rec[0] || t.requires_grad() != (bool)rec[3]) return false;
  c10::Device dev = t.device();
  if ((int64_t)dev.type() != rec[1] || (int64_t)dev.index() != rec[2]) return false;
  if (t.dim() != ndim) return false;
  c10::IntArrayRef sizes = t.sizes(), strides = t.strides();
  for (int64_t d = 0; d < ndim; d++)
    if (sizes[d] != rec[5 + d] || strides[d] != rec[5 + ndim + d]) return false;
  return true;
}

// check_tensors(types, spec, tensors) -> bool: tensors[i] has exactly type types[i] and the
// metadata of record i. Any exception (a tensor whose sizes cannot be read) is a mismatch.
PyObject* check_tensors(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyTuple_Check(args[0]) || !PyBytes_Check(args[1]) || !PyTuple_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "check_tensors(types: tuple, spec: bytes, tensors: tuple)");
    return nullptr;
  }
  PyObject* types = args[0];
  PyObject* tensors = args[2];
  Py_ssize_t n = PyTuple_GET_SIZE(tensors);
  if (PyTuple_GET_SIZE(types) != n) Py_RETURN_FALSE;
  const int64_t* p = (const int64_t*)PyBytes_AS_STRING(args[1]);
  const int64_t* end = p + PyBytes_GET_SIZE(args[1]) / sizeof(int64_t);
  try {
    for (Py_ssize_t i = 0; i < n; i++) {
      PyObject* obj = PyTuple_GET_ITEM(tensors, i);
      if ((PyObject*)Py_TYPE(obj) != PyTuple_GET_ITEM(types, i) || !THPVariable_Check(obj)) Py_RETURN_FALSE;
      if (!tensor_matches(obj, p, end)) Py_RETURN_FALSE;
    }
  } catch (...) {
    Py_RETURN_FALSE;
  }
  if (p != end) Py_RETURN_FALSE;
  Py_RETURN_TRUE;
}

PyObject* object_getattribute = nullptr;  // object.__getattribute__
PyObject* getattribute_name = nullptr;

// Note [Hook witness]: on Python 3.12+, the dicts a passing check read (each module's instance
// dict and its hook dicts) are watched (PyDict_Watch), and the modules' classes (PyType_Watch):
// any change to a hook dict, a change of a hook-named key (one containing "hook") of a module's
// dict, either dict's clearing or deallocation, or a change to a class or its bases (a
// `_forward_hooks` property, a `__getattribute__`) bumps `hook_epoch`. A batch that passed at
// epoch E, for the same module objects with the same instance dicts and classes, passes again
// while the epoch is still E: three pointer compares a module instead of a dict walk. Any other
// answer re-runs the full check and re-arms.
uint64_t hook_epoch = 1;
int module_watcher = -1, hooks_watcher = -1, type_watcher = -1;

#if PY_VERSION_HEX >= 0x030C0000
int on_hook_dict(PyDict_WatchEvent, PyObject*, PyObject*, PyObject*) {
  hook_epoch++;
  return 0;
}

int on_type(PyTypeObject*) {
  hook_epoch++;
  return 0;
}

int on_module_dict(PyDict_WatchEvent event, PyObject*, PyObject* key, PyObject*) {
  // no Python API here (an exception may be set): a key is a hook's if its text has "hook"
  bool hook_key = key == nullptr || !PyUnicode_Check(key) || !PyUnicode_IS_ASCII(key)
                  || memmem(PyUnicode_DATA(key), PyUnicode_GET_LENGTH(key), "hook", 4) != nullptr;
  if (hook_key || event == PyDict_EVENT_CLEARED || event == PyDict_EVENT_DEALLOCATED || event == PyDict_EVENT_CLONED)
    hook_epoch++;
  return 0;
}
#endif

struct Armed {  // the layout of a batch's state bytearray
  uint64_t epoch;
  uint64_t n;
  // followed by n triples (module, its instance dict, its class) as addresses
};

bool same_as_armed(PyObject* state, PyObject* mods) {
  if (module_watcher < 0 || PyByteArray_GET_SIZE(state) < (Py_ssize_t)sizeof(Armed)) return false;
  const Armed* armed = (const Armed*)PyByteArray_AS_STRING(state);
  Py_ssize_t n = PyTuple_GET_SIZE(mods);
  if (armed->epoch != hook_epoch || armed->n != (uint64_t)n) return false;
  const uintptr_t* armed_mods = (const uintptr_t*)(armed + 1);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* m = PyTuple_GET_ITEM(mods, i);
    const uintptr_t* rec = armed_mods + 3 * i;
    if ((uintptr_t)m != rec[0] || (uintptr_t)Py_TYPE(m) != rec[2]) return false;
    PyObject* d = PyObject_GenericGetDict(m, nullptr);
    if (d == nullptr) { PyErr_Clear(); return false; }
    Py_DECREF(d);  // the module holds it
    if ((uintptr_t)d != rec[1]) return false;
  }
  return true;
}

// After a full check passed: watch what it read, and record the modules and their dicts.
void arm(PyObject* state, PyObject* names, PyObject* mods) {
#if PY_VERSION_HEX >= 0x030C0000
  if (module_watcher < 0) return;
  Py_ssize_t n = PyTuple_GET_SIZE(mods);
  std::vector<uintptr_t> pairs;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* m = PyTuple_GET_ITEM(mods, i);
    PyObject* d = PyObject_GenericGetDict(m, nullptr);
    if (d == nullptr || !PyDict_Check(d) || PyDict_Watch(module_watcher, d) < 0
        || PyType_Watch(type_watcher, (PyObject*)Py_TYPE(m)) < 0) { Py_XDECREF(d); PyErr_Clear(); return; }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names); k++) {
      PyObject* v = PyDict_GetItemWithError(d, PyTuple_GET_ITEM(names, k));
      if (v == nullptr || !PyDict_Check(v) || PyDict_Watch(hooks_watcher, v) < 0) { Py_DECREF(d); PyErr_Clear(); return; }
    }
    pairs.push_back((uintptr_t)m);
    pairs.push_back((uintptr_t)d);
    pairs.push_back((uintptr_t)Py_TYPE(m));
    Py_DECREF(d);
  }
  Py_ssize_t size = sizeof(Armed) + pairs.size() * sizeof(uintptr_t);
  if (PyByteArray_Resize(state, size) < 0) { PyErr_Clear(); return; }
  Armed* armed = (Armed*)PyByteArray_AS_STRING(state);
  armed->epoch = hook_epoch;  // read after the watches: arming itself changes nothing
  armed->n = (uint64_t)n;
  if (!pairs.empty()) std::memcpy(armed + 1, pairs.data(), pairs.size() * sizeof(uintptr_t));
#endif
}

bool hook_free(PyObject* names, PyObject* mods) {
  Py_ssize_t nn = PyTuple_GET_SIZE(names);
  PyTypeObject* checked = nullptr;  // consecutive modules of one class: its lookups once
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mods); i++) {
    PyObject* m = PyTuple_GET_ITEM(mods, i);
    PyTypeObject* tp = Py_TYPE(m);
    if (tp != checked) {
      if (_PyType_Lookup(tp, getattribute_name) != object_getattribute) return false;
      for (Py_ssize_t k = 0; k < nn; k++)
        if (_PyType_Lookup(tp, PyTuple_GET_ITEM(names, k)) != nullptr) return false;
      checked = tp;
    }
    PyObject* d = PyObject_GenericGetDict(m, nullptr);
    if (d == nullptr) { PyErr_Clear(); return false; }
    bool empty = PyDict_Check(d);
    for (Py_ssize_t k = 0; empty && k < nn; k++) {
      PyObject* v = PyDict_GetItemWithError(d, PyTuple_GET_ITEM(names, k));
      empty = v != nullptr && PyDict_Check(v) && PyDict_GET_SIZE(v) == 0;
    }
    Py_DECREF(d);
    if (!empty) { PyErr_Clear(); return false; }
  }
  return true;
}

// no_hooks(names, modules, state) -> bool: True when every module's instance dict holds an
// empty dict under each name, and neither the module's class nor its __getattribute__ could
// make `module.<name>` read anything else. False means "not shown": the Python checks decide.
// `state` (a bytearray the batch owns) arms Note [Hook witness].
PyObject* no_hooks(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1]) || !PyByteArray_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "no_hooks(names: tuple, modules: tuple, state: bytearray)");
    return nullptr;
  }
  if (same_as_armed(args[2], args[1])) Py_RETURN_TRUE;
  if (!hook_free(args[0], args[1])) Py_RETURN_FALSE;
  arm(args[2], args[0], args[1]);
  Py_RETURN_TRUE;
}

PyObject* witness_available(PyObject*, PyObject*) { return PyBool_FromLong(module_watcher >= 0); }

PyMethodDef methods[] = {
    {"make_spec", (PyCFunction)make_spec, METH_O, nullptr},
    {"check_tensors", (PyCFunction)(void (*)())check_tensors, METH_FASTCALL, nullptr},
    {"no_hooks", (PyCFunction)(void (*)())no_hooks, METH_FASTCALL, nullptr},
    {"witness_available", witness_available, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "ember_guards", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit_ember_guards() {
  getattribute_name = PyUnicode_InternFromString("__getattribute__");
  if (getattribute_name == nullptr) return nullptr;
  object_getattribute = _PyType_Lookup(&PyBaseObject_Type, getattribute_name);
#if PY_VERSION_HEX >= 0x030C0000
  module_watcher = PyDict_AddWatcher(on_module_dict);
  hooks_watcher = module_watcher < 0 ? -1 : PyDict_AddWatcher(on_hook_dict);
  type_watcher = hooks_watcher < 0 ? -1 : PyType_AddWatcher(on_type);
  if (type_watcher < 0) {  // no watcher slot left: the full check every time
    if (module_watcher >= 0) PyDict_ClearWatcher(module_watcher);
    if (hooks_watcher >= 0) PyDict_ClearWatcher(hooks_watcher);
    module_watcher = hooks_watcher = -1;
    PyErr_Clear();
  }
#endif
  return PyModule_Create(&module_def);
}
