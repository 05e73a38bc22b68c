#include "kernels/inflate.hpp"

#include <cstdint>
#include <cstring>

namespace kaio {
namespace {

// Bits come least significant first (RFC 1951, 3.1.1). Reads past the end
// see zeros, and consuming them marks the stream bad, so a truncated
// stream fails instead of decoding garbage.
class BitReader {
 public:
  BitReader(const unsigned char *in, size_t size) : in_(in), size_(size) {}

  void refill() {
    while (count_ <= 56 && pos_ < size_) {
      bits_ |= uint64_t{in_[pos_++]} << count_;
      count_ += 8;
    }
  }
  uint32_t peek() const { return static_cast<uint32_t>(bits_); }
  void consume(int n) {
    if (n > count_) {
      bad_ = true;
      n = count_;
    }
    bits_ >>= n;
    count_ -= n;
  }
  uint32_t get(int n) {  // n <= 32
    refill();
    const uint32_t v = static_cast<uint32_t>(bits_ & ((uint64_t{1} << n) - 1));
    consume(n);
    return v;
  }
  void align_to_byte() { consume(count_ & 7); }
  bool bad() const { return bad_; }

 private:
  const unsigned char *in_;
  size_t size_, pos_ = 0;
  uint64_t bits_ = 0;
  int count_ = 0;
  bool bad_ = false;
};

constexpr int kMaxBits = 15;
constexpr int kFastBits = 10;

// A canonical Huffman code: codes of up to kFastBits bits decode with one
// table lookup, longer ones bit by bit from the per-length counts.
struct Huffman {
  uint16_t fast[1 << kFastBits];  // (length << 9) | symbol; 0: not a short code
  uint16_t count[kMaxBits + 1];   // codes of each length
  uint16_t symbol[288];           // symbols in code order

  // False when the lengths over-subscribe the code space. An incomplete
  // code is accepted (one distance code is legal); its unused codes fail
  // in decode.
  bool build(const uint8_t *length, int n) {
    std::memset(this, 0, sizeof *this);
    for (int s = 0; s < n; ++s) ++count[length[s]];
    count[0] = 0;
    int left = 1;
    for (int len = 1; len <= kMaxBits; ++len) {
      left = (left << 1) - count[len];
      if (left < 0) return false;
    }
    uint16_t offset[kMaxBits + 2] = {};
    uint32_t next_code[kMaxBits + 1] = {};
    for (int len = 1; len <= kMaxBits; ++len) {
      offset[len + 1] = static_cast<uint16_t>(offset[len] + count[len]);
      next_code[len] = (next_code[len - 1] + count[len - 1]) << 1;
    }
    for (int s = 0; s < n; ++s) {
      const int len = length[s];
      if (!len) continue;
      symbol[offset[len]++] = static_cast<uint16_t>(s);
      const uint32_t code = next_code[len]++;
      if (len > kFastBits) continue;
      uint32_t reversed = 0;  // the stream holds codes most significant bit first
      for (int b = 0; b < len; ++b) reversed |= ((code >> b) & 1u) << (len - 1 - b);
      for (uint32_t j = reversed; j < (1u << kFastBits); j += 1u << len)
        fast[j] = static_cast<uint16_t>(len << 9 | s);
    }
    return true;
  }

  // The next symbol, or -1 for a code the table does not hold.
  int decode(BitReader &in) const {
    in.refill();
    const uint32_t bits = in.peek();
    if (const uint16_t e = fast[bits & ((1u << kFastBits) - 1)]) {
      in.consume(e >> 9);
      return e & 511;
    }
    int code = 0, first = 0, index = 0;
    for (int len = 1; len <= kMaxBits; ++len) {
      code |= static_cast<int>((bits >> (len - 1)) & 1u);
      if (code - first < count[len]) {
        in.consume(len);
        return symbol[index + code - first];
      }
      index += count[len];
      first = (first + count[len]) << 1;
      code <<= 1;
    }
    return -1;
  }
};

constexpr uint16_t kLengthBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                      31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr uint8_t kLengthExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                      2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr uint16_t kDistBase[30] = {1,    2,    3,    4,    5,    7,     9,     13,    17,  25,
                                    33,   49,   65,   97,   129,  193,   257,   385,   513, 769,
                                    1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr uint8_t kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                    6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

class Inflater {
 public:
  Inflater(const unsigned char *in, size_t in_size, unsigned char *out, size_t out_size)
      : in_(in, in_size), out_(out), size_(out_size) {}

  bool run() {
    bool last = false;
    while (!last) {
      last = in_.get(1);
      bool ok = false;
      switch (in_.get(2)) {
        case 0: ok = stored(); break;
        case 1: ok = fixed(); break;
        case 2: ok = dynamic(); break;
        default: break;  // type 3 is reserved
      }
      if (!ok || in_.bad()) return false;
    }
    return pos_ == size_;
  }

 private:
  bool stored() {
    in_.align_to_byte();
    const uint32_t len = in_.get(16), nlen = in_.get(16);
    if (len != (~nlen & 0xffffu) || len > size_ - pos_) return false;
    for (uint32_t i = 0; i < len; ++i) out_[pos_++] = static_cast<unsigned char>(in_.get(8));
    return true;
  }

  bool fixed() {
    uint8_t len[288 + 30];
    std::memset(len, 8, 144);
    std::memset(len + 144, 9, 112);
    std::memset(len + 256, 7, 24);
    std::memset(len + 280, 8, 8);
    std::memset(len + 288, 5, 30);
    return lit_.build(len, 288) && dist_.build(len + 288, 30) && codes();
  }

  bool dynamic() {
    const int nlit = static_cast<int>(in_.get(5)) + 257, ndist = static_cast<int>(in_.get(5)) + 1;
    const int ncode = static_cast<int>(in_.get(4)) + 4;
    if (nlit > 286 || ndist > 30) return false;
    static constexpr uint8_t kOrder[19] = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                           11, 4,  12, 3, 13, 2, 14, 1, 15};
    uint8_t clen[19] = {};  // the code that codes the code lengths
    for (int i = 0; i < ncode; ++i) clen[kOrder[i]] = static_cast<uint8_t>(in_.get(3));
    if (!lit_.build(clen, 19)) return false;
    uint8_t len[286 + 30] = {};
    for (int i = 0; i < nlit + ndist;) {
      const int sym = lit_.decode(in_);
      if (sym < 0 || in_.bad()) return false;
      if (sym < 16) {
        len[i++] = static_cast<uint8_t>(sym);
        continue;
      }
      uint8_t value = 0;
      int repeat;
      if (sym == 16) {
        if (i == 0) return false;  // nothing to repeat
        value = len[i - 1];
        repeat = 3 + static_cast<int>(in_.get(2));
      } else if (sym == 17) {
        repeat = 3 + static_cast<int>(in_.get(3));
      } else {
        repeat = 11 + static_cast<int>(in_.get(7));
      }
      if (i + repeat > nlit + ndist) return false;
      while (repeat--) len[i++] = value;
    }
    if (len[256] == 0) return false;  // no end-of-block code
    return lit_.build(len, nlit) && dist_.build(len + nlit, ndist) && codes();
  }

  bool codes() {
    for (;;) {
      int sym = lit_.decode(in_);
      if (sym < 0 || in_.bad()) return false;
      if (sym < 256) {
        if (pos_ == size_) return false;
        out_[pos_++] = static_cast<unsigned char>(sym);
        continue;
      }
      if (sym == 256) return true;
      sym -= 257;
      if (sym >= 29) return false;
      const size_t len = kLengthBase[sym] + in_.get(kLengthExtra[sym]);
      const int dsym = dist_.decode(in_);
      if (dsym < 0 || dsym >= 30) return false;
      const size_t dist = kDistBase[dsym] + in_.get(kDistExtra[dsym]);
      if (in_.bad() || dist > pos_ || len > size_ - pos_) return false;
      // Byte by byte: a match may overlap the bytes it produces.
      for (size_t i = 0; i < len; ++i, ++pos_) out_[pos_] = out_[pos_ - dist];
    }
  }

  BitReader in_;
  unsigned char *out_;
  size_t size_, pos_ = 0;
  Huffman lit_, dist_;
};

}  // namespace

bool inflate_raw(const unsigned char *in, size_t in_size, unsigned char *out, size_t out_size) {
  return Inflater(in, in_size, out, out_size).run();
}

}  // namespace kaio
