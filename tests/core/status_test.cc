#include "vsl/core/status.h"

#include <cerrno>

#include <gtest/gtest.h>

#include "vsl/core/function.h"

namespace vsl {
namespace {

TEST(StatusTest, OkHasNoMessageAndMapsToZero) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.ToErrno(), 0);
}

TEST(StatusTest, ErrorsCarryCodeMessageAndErrno) {
  Status s = Status::Corruption("header CRC mismatch");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "Corruption: header CRC mismatch");
  EXPECT_EQ(s.ToErrno(), -EUCLEAN);
  EXPECT_EQ(Status::NoSpace("x").ToErrno(), -ENOSPC);
  EXPECT_EQ(Status::InvalidArgument("x").ToErrno(), -EINVAL);
  EXPECT_EQ(Status::TimedOut("x").ToErrno(), -ETIMEDOUT);
  EXPECT_EQ(s.WithContext("card image a.img").message(), "card image a.img: header CRC mismatch");
  EXPECT_TRUE(Status().WithContext("ctx").ok());
}

TEST(StatusTest, FromErrnoPicksTheMatchingCode) {
  EXPECT_EQ(Status::FromErrno(ENOENT, "open").code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::FromErrno(ENOSPC, "write").code(), StatusCode::kNoSpace);
  EXPECT_EQ(Status::FromErrno(EIO, "read").code(), StatusCode::kIOError);
  EXPECT_NE(Status::FromErrno(ENOENT, "open").message().find("No such file"), std::string::npos);
}

Result<int> Half(int v) {
  if (v % 2 != 0) return Status::InvalidArgument("odd");
  return v / 2;
}

Status Quarter(int v, int* out) {
  VSL_ASSIGN_OR_RETURN(int h, Half(v));
  VSL_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(ResultTest, ValueOrStatusAndMacros) {
  auto r = Half(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 4);
  auto e = Half(3);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  int q = 0;
  EXPECT_TRUE(Quarter(8, &q).ok());
  EXPECT_EQ(q, 2);
  EXPECT_EQ(Quarter(6, &q).code(), StatusCode::kInvalidArgument);
}

TEST(FunctionTest, InlineAndHeapCallablesMoveAndRun) {
  int hits = 0;
  Function<int(int)> small = [&hits](int x) { return x + ++hits; };
  EXPECT_EQ(small(1), 2);
  struct Big {
    char pad[200];
    int* hits;
    int operator()(int x) { return x * 10 + ++*hits; }
  };
  Big big{};
  big.hits = &hits;
  Function<int(int)> heap = big;
  EXPECT_EQ(heap(1), 12);
  Function<int(int)> moved = std::move(heap);
  EXPECT_FALSE(static_cast<bool>(heap));  // NOLINT: testing moved-from state
  EXPECT_EQ(moved(2), 23);
  auto owned = std::make_unique<int>(7);
  Function<int()> capture_unique = [p = std::move(owned)] { return *p; };
  Function<int()> m2 = std::move(capture_unique);
  EXPECT_EQ(m2(), 7);
  m2.Reset();
  EXPECT_FALSE(static_cast<bool>(m2));
}

}  // namespace
}  // namespace vsl
