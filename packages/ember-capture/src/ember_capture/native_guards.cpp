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

// Note [Native source reads]: an entry's guarded sources are attribute chains from the frame's
// locals (`L[0]._modules['layer1']._modules['0']._parameters['weight']`, ~1,300 for a
// resnet50) and most of their checks are identities, types and absent names. `run_program`
// reads them and runs those checks in one call, as the generated Python would, with the same
// Python operations (PyObject_GetAttr, PyObject_GetItem, `in`, `is`): a register per source,
// one op per read or check (the program is made by guard_program.py). It answers a tuple of the
// registers the rest of the entry reads (a hit so far), False when a check is false (the Python
// would answer MISS on it too), or None when it cannot decide (an exception, a pinned constant
// that is not the traced object): the entry then runs its Python guards from the start.
enum Op : int64_t {
  OP_GETATTR = 1,    // dst, src, const(name)
  OP_GETITEM = 2,    // dst, src, const(key)
  OP_CONST = 3,      // dst, const
  OP_ID = 4,         // reg, address              id(X) == address
  OP_IS = 5,         // reg, const                X is const
  OP_PIN = 6,        // reg, const, k             X is const: skip the next k ops; else run them (k = 0: undecided)
  OP_NOT_IN_DICT = 7,// reg, const(tuple of str)  each not in X.__dict__
  OP_NOT_IN = 8,     // reg, const(tuple of str)  each not in X
  OP_GET_IS = 9,     // reg, const(key), const    X.get(key) is const
  OP_LIST_EQ = 10,   // reg, const(list)          list(X) == const
  OP_TENSOR = 11,    // reg, const(type), offset  a static tensor guard (record at offset of the spec)
  OP_TYPE = 12,      // reg, const                type(X) is const
  OP_DISTINCT = 13,  // 0, n, 0, then n registers (padded to 4 words): distinct objects
  OP_EQ = 14,        // reg, const                type(X) is type(const) and X == const
};

// The objects in the n registers listed are pairwise distinct (`len({id(a) for a in ...}) == n`).
bool all_distinct(const int64_t* list, int64_t n, const std::vector<PyObject*>& regs, int& undecided) {
  size_t size = 16;
  while (size < 2 * (size_t)n) size *= 2;
  std::vector<uintptr_t> table(size, 0);
  for (int64_t i = 0; i < n; i++) {
    if (list[i] < 0 || list[i] >= (int64_t)regs.size() || regs[list[i]] == nullptr) { undecided = 1; return false; }
    uintptr_t p = (uintptr_t)regs[list[i]];
    size_t h = (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull) & (size - 1);
    while (table[h] != 0) {
      if (table[h] == p) return false;
      h = (h + 1) & (size - 1);
    }
    table[h] = p;
  }
  return true;
}

PyObject* dict_name = nullptr;  // "__dict__"
PyObject* get_name = nullptr;   // "get"

// Note [instance attribute fast path]: most of a program's reads are a module's attributes that
// live in its instance dict (`_modules`, `_parameters`, `stride`, `training`): through
// PyObject_GetAttr, a torch module (its class defines `__getattr__`) pays two type lookups for
// the getattr hook, then the generic lookup. When the class keeps object's `__getattribute__`
// (so no C base overrides the slot either: each one that does has its own wrapper in its dict)
// and no class in its MRO defines the name at all (no descriptor, data or not), the generic
// lookup answers the instance dict's value, and `__getattr__` is never consulted: that value
// is read directly. Anything else (not in the dict, no dict, a class attribute) takes
// PyObject_GetAttr. Answers a new reference, or nullptr with no error set.
PyObject* instance_attr(PyObject* obj, PyObject* name) {
  PyTypeObject* tp = Py_TYPE(obj);
  if (!PyUnicode_CheckExact(name) || tp->tp_dictoffset == 0
      || _PyType_Lookup(tp, getattribute_name) != object_getattribute || _PyType_Lookup(tp, name) != nullptr)
    return nullptr;
  PyObject* d = PyObject_GenericGetDict(obj, nullptr);
  if (d == nullptr) { PyErr_Clear(); return nullptr; }
  PyObject* v = PyDict_CheckExact(d) ? PyDict_GetItemWithError(d, name) : nullptr;  // borrowed
  Py_XINCREF(v);
  Py_DECREF(d);
  if (v == nullptr) PyErr_Clear();
  return v;
}

// 1: passed, 0: a check is false, -1: undecided (an exception is cleared)
int run_ops(const int64_t* code, Py_ssize_t n, PyObject* consts, const int64_t* spec, Py_ssize_t spec_len,
            std::vector<PyObject*>& regs) {
  Py_ssize_t pc = 0;
  auto C = [&](int64_t i) { return PyTuple_GET_ITEM(consts, i); };
  while (pc < n) {
    int64_t op = code[pc], a = code[pc + 1], b = code[pc + 2], c = code[pc + 3];
    pc += 4;
    if (op == OP_DISTINCT) {
      int64_t words = (b + 3) / 4 * 4;
      if (b < 0 || pc + words > n) return -1;
      int undecided = 0;
      bool ok = all_distinct(code + pc, b, regs, undecided);
      if (undecided) return -1;
      if (!ok) return 0;
      pc += words;
      continue;
    }
    if (a < 0 || a >= (int64_t)regs.size()) return -1;
    PyObject* x = regs[a];
    if (op >= OP_ID && x == nullptr) return -1;
    switch (op) {
      case OP_GETATTR: case OP_GETITEM: case OP_CONST: {
        PyObject* v;
        if (op == OP_CONST) {
          v = C(b);
          Py_INCREF(v);
        } else {
          if (b < 0 || b >= (int64_t)regs.size() || regs[b] == nullptr) return -1;
          PyObject* src = regs[b];
          PyObject* key = C(c);
          if (op == OP_GETATTR) {
            v = instance_attr(src, key);  // Note [instance attribute fast path]
            if (v == nullptr) v = PyObject_GetAttr(src, key);
          } else if (PyDict_CheckExact(src) && PyUnicode_CheckExact(key)) {
            v = PyDict_GetItemWithError(src, key);  // borrowed
            if (v == nullptr) { if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key); }
            else Py_INCREF(v);
          } else {
            v = PyObject_GetItem(src, key);
          }
        }
        if (v == nullptr) { PyErr_Clear(); return -1; }
        Py_XSETREF(regs[a], v);
        break;
      }
      case OP_ID: if ((int64_t)(intptr_t)x != b) return 0; break;
      case OP_IS: if (x != C(b)) return 0; break;
      case OP_PIN:
        if (x == C(b)) pc += 4 * c;
        else if (c == 0) return -1;
        break;
      case OP_EQ: {  // type(X) is type(const) and X == const
        PyObject* v = C(b);
        if (Py_TYPE(x) != Py_TYPE(v)) return 0;
        int eq = PyObject_RichCompareBool(x, v, Py_EQ);
        if (eq < 0) { PyErr_Clear(); return -1; }
        if (!eq) return 0;
        break;
      }
      case OP_TYPE: if ((PyObject*)Py_TYPE(x) != C(b)) return 0; break;
      case OP_NOT_IN_DICT: case OP_NOT_IN: {
        PyObject* d = x;
        if (op == OP_NOT_IN_DICT) {
          d = PyObject_GetAttr(x, dict_name);
          if (d == nullptr) { PyErr_Clear(); return -1; }
        }
        PyObject* names = C(b);
        int found = 0;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names) && found == 0; k++)
          found = PyDict_CheckExact(d) ? PyDict_Contains(d, PyTuple_GET_ITEM(names, k))
                                       : PySequence_Contains(d, PyTuple_GET_ITEM(names, k));
        if (op == OP_NOT_IN_DICT) Py_DECREF(d);
        if (found < 0) { PyErr_Clear(); return -1; }
        if (found) return 0;
        break;
      }
      case OP_GET_IS: {
        PyObject* v = PyObject_CallMethodOneArg(x, get_name, C(b));
        if (v == nullptr) { PyErr_Clear(); return -1; }
        Py_DECREF(v);  // compared by address only
        if (v != C(c)) return 0;
        break;
      }
      case OP_LIST_EQ: {
        PyObject* want = C(b);
        if (PyDict_CheckExact(x) && PyList_CheckExact(want)) {  // its keys in order, no list built
          if (PyDict_GET_SIZE(x) != PyList_GET_SIZE(want)) return 0;
          Py_ssize_t pos = 0, k = 0;
          PyObject *key, *value;
          while (PyDict_Next(x, &pos, &key, &value)) {
            if (k >= PyList_GET_SIZE(want)) return -1;  // changed while read: undecided
            Py_INCREF(key);
            int eq = PyObject_RichCompareBool(key, PyList_GET_ITEM(want, k++), Py_EQ);
            Py_DECREF(key);
            if (eq < 0) { PyErr_Clear(); return -1; }
            if (!eq) return 0;
          }
          if (k != PyList_GET_SIZE(want)) return -1;
          break;
        }
        PyObject* l = PySequence_List(x);
        if (l == nullptr) { PyErr_Clear(); return -1; }
        int eq = PyObject_RichCompareBool(l, C(b), Py_EQ);
        Py_DECREF(l);
        if (eq < 0) { PyErr_Clear(); return -1; }
        if (!eq) return 0;
        break;
      }
      case OP_TENSOR: {
        if ((PyObject*)Py_TYPE(x) != C(b) || !THPVariable_Check(x)) return 0;
        if (c < 0 || c >= spec_len) return -1;
        const int64_t* p = spec + c;
        try {
          if (!tensor_matches(x, p, spec + spec_len)) return 0;
        } catch (...) {
          return -1;
        }
        break;
      }
      default:
        return -1;
    }
  }
  return 1;
}

// run_program(code, consts, spec, nregs, outs, L) -> tuple | False | None (Note [Native source reads]).
// Register 0 holds L; `outs` (a tuple of register numbers) are the registers answered.
PyObject* run_program(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 6 || !PyBytes_Check(args[0]) || !PyTuple_Check(args[1]) || !PyBytes_Check(args[2])
      || !PyLong_Check(args[3]) || !PyBytes_Check(args[4])) {
    PyErr_SetString(PyExc_TypeError, "run_program(code: bytes, consts: tuple, spec: bytes, nregs: int, outs: bytes, L)");
    return nullptr;
  }
  Py_ssize_t nregs = PyLong_AsSsize_t(args[3]);
  if (nregs < 1) Py_RETURN_NONE;
  std::vector<PyObject*> regs((size_t)nregs, nullptr);
  Py_INCREF(args[5]);
  regs[0] = args[5];
  const int64_t* code = (const int64_t*)PyBytes_AS_STRING(args[0]);
  Py_ssize_t n = PyBytes_GET_SIZE(args[0]) / sizeof(int64_t);
  const int64_t* spec = (const int64_t*)PyBytes_AS_STRING(args[2]);
  Py_ssize_t spec_len = PyBytes_GET_SIZE(args[2]) / sizeof(int64_t);
  int ok = run_ops(code, n - n % 4, args[1], spec, spec_len, regs);
  PyObject* out = nullptr;
  if (ok == 1) {
    const int64_t* outs = (const int64_t*)PyBytes_AS_STRING(args[4]);
    Py_ssize_t k = PyBytes_GET_SIZE(args[4]) / sizeof(int64_t);
    out = PyTuple_New(k);
    for (Py_ssize_t i = 0; out != nullptr && i < k; i++) {
      PyObject* v = (outs[i] >= 0 && outs[i] < nregs) ? regs[outs[i]] : nullptr;
      if (v == nullptr) { Py_CLEAR(out); break; }  // a register never written: undecided
      Py_INCREF(v);
      PyTuple_SET_ITEM(out, i, v);
    }
    if (out == nullptr) { PyErr_Clear(); out = Py_None; Py_INCREF(out); }
  } else {
    out = ok == 0 ? Py_False : Py_None;
    Py_INCREF(out);
  }
  for (PyObject* r : regs) Py_XDECREF(r);
  return out;
}

// Note [Native address check]: same_addresses(indices, ptrs, tensors) -> bool: tensors[indices[i]]
// is a tensor whose data_ptr() is ptrs[i], for every i (both int64 arrays in bytes). The CUDA
// graph runner of ember's facade checks its ~300 static inputs (parameters, buffers) with it
// before each replay: ~5 ns a tensor against ~70 ns for `map(Tensor.data_ptr, ...)` and torch's
// own helper. False where it cannot show it (not a tensor, an index out of range, no storage).
PyObject* same_addresses(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1])
      || PyBytes_GET_SIZE(args[0]) != PyBytes_GET_SIZE(args[1])) {
    PyErr_SetString(PyExc_TypeError, "same_addresses(indices: bytes, ptrs: bytes, tensors: list | tuple)");
    return nullptr;
  }
  PyObject* seq = args[2];
  PyObject** items;
  Py_ssize_t size;
  if (PyList_CheckExact(seq)) {
    items = PySequence_Fast_ITEMS(seq);
    size = PyList_GET_SIZE(seq);
  } else if (PyTuple_CheckExact(seq)) {
    items = PySequence_Fast_ITEMS(seq);
    size = PyTuple_GET_SIZE(seq);
  } else {
    Py_RETURN_FALSE;
  }
  const int64_t* idx = (const int64_t*)PyBytes_AS_STRING(args[0]);
  const int64_t* ptrs = (const int64_t*)PyBytes_AS_STRING(args[1]);
  Py_ssize_t n = PyBytes_GET_SIZE(args[0]) / (Py_ssize_t)sizeof(int64_t);
  try {
    for (Py_ssize_t i = 0; i < n; i++) {
      if (idx[i] < 0 || idx[i] >= size) Py_RETURN_FALSE;
      PyObject* obj = items[idx[i]];
      if (!THPVariable_Check(obj)) Py_RETURN_FALSE;
      const at::Tensor& t = THPVariable_Unpack(obj);
      if (!t.has_storage() || (int64_t)(intptr_t)t.const_data_ptr() != ptrs[i]) Py_RETURN_FALSE;
    }
  } catch (...) {
    Py_RETURN_FALSE;
  }
  Py_RETURN_TRUE;
}

PyObject* witness_available(PyObject*, PyObject*) { return PyBool_FromLong(module_watcher >= 0); }

PyMethodDef methods[] = {
    {"make_spec", (PyCFunction)make_spec, METH_O, nullptr},
    {"check_tensors", (PyCFunction)(void (*)())check_tensors, METH_FASTCALL, nullptr},
    {"no_hooks", (PyCFunction)(void (*)())no_hooks, METH_FASTCALL, nullptr},
    {"witness_available", witness_available, METH_NOARGS, nullptr},
    {"run_program", (PyCFunction)(void (*)())run_program, METH_FASTCALL, nullptr},
    {"same_addresses", (PyCFunction)(void (*)())same_addresses, METH_FASTCALL, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "ember_guards", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit_ember_guards() {
  getattribute_name = PyUnicode_InternFromString("__getattribute__");
  if (getattribute_name == nullptr) return nullptr;
  object_getattribute = _PyType_Lookup(&PyBaseObject_Type, getattribute_name);
  dict_name = PyUnicode_InternFromString("__dict__");
  get_name = PyUnicode_InternFromString("get");
  if (dict_name == nullptr || get_name == nullptr) return nullptr;
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
