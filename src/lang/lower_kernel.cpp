// The two kernel shapes around the expression lowering: a grid-stride map
// over the output elements (scalar and 16-byte vector entries), and a row
// kernel (reduction phases, then the map phase, per row).
#include <string>
#include <vector>

#include "lang/lower.hpp"
#include "lang/lower_expr.hpp"

namespace kaio::lang {
namespace {

constexpr int kUnroll = 2;  // output units per thread per loop trip, loads first

int log2i(int v) {
  int s = 0;
  while ((1 << s) < v) ++s;
  return s;
}

std::string param_list(const Kernel &k) {
  std::string s;
  auto add = [&](const std::string &decl) {
    if (!s.empty()) s += ",\n";
    s += "\t.param " + decl;
  };
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param &p = k.params[i];
    std::string n = "p" + std::to_string(i);
    if (p.tensor) {
      add(".u64 " + n + "_ptr");
      add(".u32 " + n + "_rows");
      add(".u32 " + n + "_cols");
      add(".u64 " + n + "_stride");
    } else {
      add(std::string(p.scalar == Type::f32 ? ".f32 " : p.scalar == Type::i32 ? ".s32 " : ".u32 ") + n);
    }
  }
  add(".u64 err");
  return s;
}

class EntryWriter {
 public:
  EntryWriter(const Kernel &k, std::string name) : k_(k), name_(std::move(name)), x_(k, b_) {}

  std::string text() const {
    std::string s = ".visible .entry " + name_ + "(\n" + param_list(k_) + "\n)\n.maxntid " +
                    std::to_string(kBlockThreads) + ", 1, 1\n{\n" + b_.declarations() + shared_;
    return s + "\n" + b_.body + "}\n";
  }

  void load_params() {
    x_.tensors.resize(k_.params.size());
    x_.scalars.resize(k_.params.size());
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const Param &p = k_.params[i];
      std::string n = "p" + std::to_string(i);
      if (p.tensor) {
        TensorRegs &t = x_.tensors[i];
        std::string raw = b_.op(b_.rd(), "ld.param.u64", "[" + n + "_ptr]");
        t.ptr = b_.op(b_.rd(), "cvta.to.global.u64", raw);
        t.rows = b_.op(b_.r(), "ld.param.u32", "[" + n + "_rows]");
        t.cols = b_.op(b_.r(), "ld.param.u32", "[" + n + "_cols]");
        t.stride = b_.op(b_.rd(), "ld.param.u64", "[" + n + "_stride]");
      } else if (p.scalar == Type::f32) {
        x_.scalars[i] = b_.op(b_.f(), "ld.param.f32", "[" + n + "]");
      } else {
        x_.scalars[i] = b_.op(b_.r(), p.scalar == Type::i32 ? "ld.param.s32" : "ld.param.u32", "[" + n + "]");
      }
    }
    std::string raw = b_.op(b_.rd(), "ld.param.u64", "[err]");
    x_.err = b_.op(b_.rd(), "cvta.to.global.u64", raw);
    const TensorRegs &out = x_.tensors[k_.outputs[0]];
    x_.out_rows = out.rows;
    x_.out_cols = out.cols;
  }

  // Evaluates every let of the element (lets always run, so their bad
  // indices are reported whatever uses them) and returns the stored values
  // in k.outputs order.
  std::vector<Val> element_outputs(ElemContext &elem) {
    std::vector<Val> values;
    for (const Stmt &s : k_.body) {
      if (s.kind == StmtKind::let) {
        if (s.reduction == Builtin::none) x_.let_value(s.index, &elem);
      } else {
        values.push_back(x_.lower(*s.value, &elem, elem.guard));
      }
    }
    return values;
  }

  void map_entry(bool vector) {
    load_params();
    const int V = vector ? vector_width(k_) : 1;
    std::string n = b_.op(b_.r(), "mul.lo.u32", x_.out_rows + ", " + x_.out_cols);
    std::string units = V > 1 ? b_.op(b_.r(), "shr.u32", n + ", " + std::to_string(log2i(V))) : n;
    std::string tid = b_.op(b_.r(), "mov.u32", "%tid.x");
    std::string ntid = b_.op(b_.r(), "mov.u32", "%ntid.x");
    std::string ctaid = b_.op(b_.r(), "mov.u32", "%ctaid.x");
    std::string nctaid = b_.op(b_.r(), "mov.u32", "%nctaid.x");
    std::string idx = b_.op(b_.r(), "mad.lo.u32", ctaid + ", " + ntid + ", " + tid);
    std::string gstride = b_.op(b_.r(), "mul.lo.u32", ntid + ", " + nctaid);
    std::string step = b_.op(b_.r(), "mul.lo.u32", gstride + ", " + std::to_string(kUnroll));

    std::string pre, loop;
    x_.preamble = &pre;
    b_.out = &loop;
    std::string top = b_.label("loop"), done = b_.label("done");
    b_.place(top);
    std::string finished = b_.op(b_.p(), "setp.ge.u32", idx + ", " + units);
    b_.ins("@" + finished + " bra.uni " + done);

    struct Unit {
      std::string guard, row, col0, i0;
      std::vector<std::vector<std::string>> words;  // by param: prefetched vector words
      std::vector<Val> plain;                        // by param: prefetched scalar values
      std::vector<std::string> addr;                 // by param: address of (row, col0)
    };
    std::vector<Unit> units_(kUnroll);
    // addresses and loads of every unit first: kUnroll * inputs loads in flight
    for (int u = 0; u < kUnroll; ++u) {
      Unit &un = units_[u];
      std::string iu = u == 0 ? idx : b_.op(b_.r(), "mad.lo.u32", gstride + ", " + std::to_string(u) + ", " + idx);
      if (u > 0) un.guard = b_.op(b_.p(), "setp.lt.u32", iu + ", " + units);
      un.i0 = V > 1 ? b_.op(b_.r(), "shl.b32", iu + ", " + std::to_string(log2i(V))) : iu;
      un.row = b_.op(b_.r(), "div.u32", un.i0 + ", " + x_.out_cols);
      std::string back = b_.op(b_.r(), "mul.lo.u32", un.row + ", " + x_.out_cols);
      un.col0 = b_.op(b_.r(), "sub.u32", un.i0 + ", " + back);
      un.words.resize(k_.params.size());
      un.plain.resize(k_.params.size());
      un.addr.resize(k_.params.size());
      for (size_t p = 0; p < k_.params.size(); ++p) {
        const Param &par = k_.params[p];
        if (!par.tensor || !(par.read_plain || par.output)) continue;
        un.addr[p] = x_.element_address(static_cast<int>(p), un.row, un.col0);
        if (!par.read_plain) continue;
        if (V == 1) {
          un.plain[p] = x_.load_element(par.dtype, un.addr[p], un.guard);
        } else {
          un.words[p] = load_words(par.dtype, V, un.addr[p], un.guard);
        }
      }
    }
    for (int u = 0; u < kUnroll; ++u) {
      Unit &un = units_[u];
      std::vector<std::vector<Val>> outs(k_.outputs.size());
      for (int j = 0; j < V; ++j) {
        ElemContext elem;
        elem.guard = un.guard;
        elem.row = un.row;
        elem.col = j == 0 ? un.col0 : b_.op(b_.r(), "add.u32", un.col0 + ", " + std::to_string(j));
        elem.i = j == 0 ? un.i0 : b_.op(b_.r(), "add.u32", un.i0 + ", " + std::to_string(j));
        for (size_t p = 0; p < k_.params.size(); ++p) {
          const Param &par = k_.params[p];
          if (!par.tensor || !par.read_plain) continue;
          elem.plain[static_cast<int>(p)] = V == 1 ? un.plain[p] : extract(par.dtype, un.words[p], j);
        }
        std::vector<Val> vals = element_outputs(elem);
        for (size_t o = 0; o < vals.size(); ++o) outs[o].push_back(vals[o]);
      }
      for (size_t o = 0; o < k_.outputs.size(); ++o) {
        int p = k_.outputs[o];
        DType d = k_.params[p].dtype;
        if (V == 1)
          x_.store_element(d, un.addr[p], outs[o][0], un.guard);
        else
          store_words(d, un.addr[p], outs[o], un.guard);
      }
    }
    b_.ins("add.u32 " + idx + ", " + idx + ", " + step);
    b_.ins("bra.uni " + top);
    b_.place(done);
    b_.ins("ret");
    b_.out = &b_.body;
    b_.body += pre + loop;
  }

  // cached: the 16-byte path for rows of at most lanes * kRowSlotElems
  // columns. Each lane loads its slots of every tensor read at (row, col)
  // once, into registers, and every phase (reductions, then outputs) reuses
  // them: x is read from memory once. Otherwise each phase loops over the
  // row with element accesses, reading x again (mostly from L2).
  void row_entry(bool warp, bool cached) {
    load_params();
    const int lanes = warp ? 32 : kBlockThreads;
    std::string tid = b_.op(b_.r(), "mov.u32", "%tid.x");
    std::string ctaid = b_.op(b_.r(), "mov.u32", "%ctaid.x");
    std::string warp_id = b_.op(b_.r(), "shr.u32", tid + ", 5");
    std::string lane_in_warp = b_.op(b_.r(), "and.b32", tid + ", 31");
    std::string row, lane;
    std::string exit = b_.label("exit");
    if (warp) {
      // whole warps leave together, before any shuffle
      row = b_.op(b_.r(), "mad.lo.u32", ctaid + ", " + std::to_string(kWarpRowsPerBlock) + ", " + warp_id);
      lane = lane_in_warp;
      std::string past = b_.op(b_.p(), "setp.ge.u32", row + ", " + x_.out_rows);
      b_.ins("@" + past + " bra.uni " + exit);
    } else {
      row = ctaid;
      lane = tid;
    }
    x_.uniform_row = row;
    std::string row_base = b_.op(b_.r(), "mul.lo.u32", row + ", " + x_.out_cols);
    if (cached) prefetch_slots(lane, lanes, row);

    int reduction_index = 0;
    for (const Stmt &s : k_.body) {
      if (s.reduction == Builtin::none) continue;
      const Expr &arg = *s.value->args[0];
      const Type t = arg.type;
      const bool is_max = s.reduction == Builtin::max_reduce;
      std::string acc = t == Type::f32 ? b_.f() : b_.r();
      std::string init = t == Type::f32 ? (is_max ? "0fFF800000" : "0f00000000")
                                        : (is_max ? (t == Type::i32 ? "-2147483648" : "0") : "0");
      b_.ins(std::string(t == Type::f32 ? "mov.f32 " : "mov.b32 ") + acc + ", " + init);
      const std::string combine = std::string(is_max ? "max." : (t == Type::f32 ? "add.rn." : "add.")) +
                                  (t == Type::f32 ? "f32" : t == Type::u32 ? "u32" : "s32");
      auto add = [&](ElemContext &elem) {
        Val v = x_.lower(arg, &elem, "");
        b_.ins(combine + " " + acc + ", " + acc + ", " + v.reg);
      };
      if (cached)
        slot_region(row, row_base, [&](int, std::vector<ElemContext> &elems) {
          for (ElemContext &e : elems) add(e);
        });
      else
        column_loop(lane, lanes, row, row_base, add);
      for (int off = 16; off >= 1; off /= 2) {
        std::string other = t == Type::f32 ? b_.f() : b_.r();
        b_.ins("shfl.sync.bfly.b32 " + other + ", " + acc + ", " + std::to_string(off) + ", 31, -1");
        b_.ins(combine + " " + acc + ", " + acc + ", " + other);
      }
      if (!warp) {
        // one partial per warp through shared memory; every thread folds
        // them in the same order, so all hold the same bits
        std::string arr = "kaio_red" + std::to_string(reduction_index);
        shared_ += "\t.shared .align 4 .b32 " + arr + "[" + std::to_string(kBlockThreads / 32) + "];\n";
        std::string base = b_.op(b_.r(), "mov.u32", arr);
        std::string slot = b_.op(b_.r(), "mad.lo.u32", warp_id + ", 4, " + base);
        std::string lead = b_.op(b_.p(), "setp.eq.u32", lane_in_warp + ", 0");
        b_.ins("@" + lead + " st.shared.b32 [" + slot + "], " + acc);
        b_.ins("bar.sync 0");
        std::string total;
        for (int w = 0; w < kBlockThreads / 32; ++w) {
          std::string part = t == Type::f32 ? b_.f() : b_.r();
          b_.ins("ld.shared.b32 " + part + ", [" + base + "+" + std::to_string(4 * w) + "]");
          total = w == 0 ? part : b_.op(t == Type::f32 ? b_.f() : b_.r(), combine, total + ", " + part);
        }
        acc = total;
      }
      x_.set_uniform_let(s.index, {acc, t});
      ++reduction_index;
    }
    if (cached) {
      slot_region(row, row_base, [&](int s, std::vector<ElemContext> &elems) {
        std::vector<std::vector<Val>> outs(k_.outputs.size());
        for (ElemContext &e : elems) {
          std::vector<Val> vals = element_outputs(e);
          for (size_t o = 0; o < vals.size(); ++o) outs[o].push_back(vals[o]);
        }
        for (size_t o = 0; o < outs.size(); ++o) {
          int p = k_.outputs[o];
          store_words(k_.params[p].dtype, x_.element_address(p, row, slot_col0_[s]), outs[o], "");
        }
      });
    } else {
      column_loop(lane, lanes, row, row_base, [&](ElemContext &elem) {
        std::vector<Val> vals = element_outputs(elem);
        for (size_t o = 0; o < vals.size(); ++o) {
          int p = k_.outputs[o];
          std::string addr = x_.element_address(p, elem.row, elem.col);
          x_.store_element(k_.params[p].dtype, addr, vals[o], "");
        }
      });
    }
    b_.place(exit);
    b_.ins("ret");
  }

 private:
  // Slot s of a lane covers columns [(s * lanes + lane) * V, ... + V).
  void prefetch_slots(const std::string &lane, int lanes, const std::string &row) {
    const int V = vector_width(k_);
    const int K = std::max(1, kRowSlotElems / V);
    words_.assign(k_.params.size(), {});
    for (int s = 0; s < K; ++s) {
      std::string unit = b_.op(b_.r(), "add.u32", lane + ", " + std::to_string(s * lanes));
      slot_col0_.push_back(b_.op(b_.r(), "shl.b32", unit + ", " + std::to_string(log2i(V))));
      slot_valid_.push_back(b_.op(b_.p(), "setp.lt.u32", slot_col0_.back() + ", " + x_.out_cols));
    }
    for (size_t p = 0; p < k_.params.size(); ++p) {
      const Param &par = k_.params[p];
      if (!par.tensor || !par.read_plain) continue;
      for (int s = 0; s < K; ++s) {
        std::string addr = x_.element_address(static_cast<int>(p), row, slot_col0_[s]);
        words_[p].push_back(load_words(par.dtype, V, addr, slot_valid_[s]));
      }
    }
  }

  // Runs body(slot, elements) for each of this lane's slots that lies in the
  // row; validity only falls with the slot index, so the first slot past
  // the row's end skips the rest, and inside the region no guard is needed.
  template <class SlotBody>
  void slot_region(const std::string &row, const std::string &row_base, SlotBody body) {
    const int V = vector_width(k_);
    std::string pre, code;
    x_.preamble = &pre;
    b_.out = &code;
    std::string end = b_.label("slots_end");
    for (size_t s = 0; s < slot_col0_.size(); ++s) {
      b_.ins("@!" + slot_valid_[s] + " bra " + end);
      std::vector<ElemContext> elems(V);
      for (int j = 0; j < V; ++j) {
        ElemContext &e = elems[j];
        e.row = row;
        e.col = j == 0 ? slot_col0_[s] : b_.op(b_.r(), "add.u32", slot_col0_[s] + ", " + std::to_string(j));
        e.i = b_.op(b_.r(), "add.u32", row_base + ", " + e.col);
        for (size_t p = 0; p < k_.params.size(); ++p)
          if (!words_[p].empty()) e.plain[static_cast<int>(p)] = extract(k_.params[p].dtype, words_[p][s], j);
      }
      body(static_cast<int>(s), elems);
    }
    b_.place(end);
    b_.out = &b_.body;
    b_.body += pre + code;
  }

  std::vector<std::string> slot_col0_, slot_valid_;
  std::vector<std::vector<std::vector<std::string>>> words_;  // [param][slot] -> words

  template <class Body>
  void column_loop(const std::string &lane, int lanes, const std::string &row,
                   const std::string &row_base, Body body) {
    std::string pre, loop;
    x_.preamble = &pre;
    b_.out = &loop;
    std::string c = b_.op(b_.r(), "mov.u32", lane);
    std::string top = b_.label("cols"), end = b_.label("cols_end");
    b_.place(top);
    std::string past = b_.op(b_.p(), "setp.ge.u32", c + ", " + x_.out_cols);
    b_.ins("@" + past + " bra " + end);
    ElemContext elem;
    elem.row = row;
    elem.col = c;
    elem.i = b_.op(b_.r(), "add.u32", row_base + ", " + c);
    body(elem);
    b_.ins("add.u32 " + c + ", " + c + ", " + std::to_string(lanes));
    b_.ins("bra " + top);
    b_.place(end);
    b_.out = &b_.body;
    b_.body += pre + loop;
  }

  std::vector<std::string> load_words(DType d, int V, const std::string &addr, const std::string &guard) {
    int nwords = V * dtype_bytes(d) / 4;
    std::vector<std::string> w;
    for (int j = 0; j < nwords; ++j) w.push_back(b_.r());
    std::string list = nwords == 1 ? w[0] : "{" + join(w) + "}";
    if (!guard.empty())
      for (const std::string &r : w) b_.ins("mov.b32 " + r + ", 0");
    std::string g = guard.empty() ? "" : "@" + guard + " ";
    std::string v = nwords == 1 ? "" : nwords == 2 ? ".v2" : ".v4";
    b_.ins(g + "ld.global" + v + ".b32 " + list + ", [" + addr + "]");
    return w;
  }

  Val extract(DType d, const std::vector<std::string> &w, int j) {
    switch (dtype_bytes(d)) {
      case 4:
        if (d == DType::f32) return {b_.op(b_.f(), "mov.b32", w[j]), Type::f32};
        return {w[j], value_type(d)};
      case 2: {
        const std::string &word = w[j / 2];
        if (d == DType::f16) {
          std::string lo = b_.h(), hi = b_.h();
          b_.ins("mov.b32 {" + lo + ", " + hi + "}, " + word);
          return {b_.op(b_.f(), "cvt.f32.f16", j % 2 ? hi : lo), Type::f32};
        }
        std::string bits = j % 2 ? b_.op(b_.r(), "and.b32", word + ", -65536") : b_.op(b_.r(), "shl.b32", word + ", 16");
        return {b_.op(b_.f(), "mov.b32", bits), Type::f32};
      }
      default: {
        const char *opc = d == DType::i8 ? "bfe.s32" : "bfe.u32";
        return {b_.op(b_.r(), opc, w[j / 4] + ", " + std::to_string(8 * (j % 4)) + ", 8"), value_type(d)};
      }
    }
  }

  void store_words(DType d, const std::string &addr, const std::vector<Val> &v, const std::string &guard) {
    std::vector<std::string> w;
    const int V = static_cast<int>(v.size());
    switch (dtype_bytes(d)) {
      case 4:
        for (const Val &x : v) w.push_back(d == DType::f32 ? b_.op(b_.r(), "mov.b32", x.reg) : x.reg);
        break;
      case 2:
        for (int j = 0; j < V; j += 2)
          w.push_back(b_.op(b_.r(), d == DType::f16 ? "cvt.rn.f16x2.f32" : "cvt.rn.bf16x2.f32",
                            v[j + 1].reg + ", " + v[j].reg));
        break;
      default:
        for (int j = 0; j < V; j += 4) {
          std::string word = v[j].reg;
          for (int b = 1; b < 4; ++b)
            word = b_.op(b_.r(), "bfi.b32", v[j + b].reg + ", " + word + ", " + std::to_string(8 * b) + ", 8");
          w.push_back(word);
        }
    }
    std::string g = guard.empty() ? "" : "@" + guard + " ";
    std::string vs = w.size() == 1 ? "" : w.size() == 2 ? ".v2" : ".v4";
    std::string list = w.size() == 1 ? w[0] : "{" + join(w) + "}";
    b_.ins(g + "st.global" + vs + ".b32 [" + addr + "], " + list);
  }

  static std::string join(const std::vector<std::string> &v) {
    std::string s;
    for (size_t j = 0; j < v.size(); ++j) s += (j ? ", " : "") + v[j];
    return s;
  }

  const Kernel &k_;
  std::string name_;
  PtxBuilder b_;
  ExprLowerer x_;
  std::string shared_;
};

}  // namespace

int vector_width(const Kernel &k) {
  int widest = 1;
  for (const Param &p : k.params)
    if (p.tensor && (p.read_plain || p.output)) widest = std::max(widest, dtype_bytes(p.dtype));
  return 16 / widest;
}

std::string entry_base(const Kernel &k) { return "kaio_lang_" + k.name; }

std::string lower_to_ptx(const Kernel &k) {
  std::string out =
      "// Generated by libkaio's kernel-language compiler from kernel '" + k.name +
      "'.\n.version 7.0\n.target sm_80\n.address_size 64\n\n";
  const std::string base = entry_base(k);
  if (k.row_kernel) {
    for (int e = 0; e < 4; ++e) {
      const bool warp = e % 2 == 0, cached = e >= 2;
      EntryWriter w(k, base + (warp ? "_warp" : "_block") + (cached ? "_cached" : ""));
      w.row_entry(warp, cached);
      out += (e ? "\n" : "") + w.text();
    }
    return out;
  }
  EntryWriter s(k, base + "_scalar");
  s.map_entry(false);
  EntryWriter v(k, base + "_vector");
  v.map_entry(true);
  return out + s.text() + "\n" + v.text();
}

}  // namespace kaio::lang
