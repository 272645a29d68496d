// A card shared by two hosts (docs/ha.md): the card server (vslflash serve) in this
// process, and two hosts, each a Card on the shared backend with its own host id, each
// port a real Unix connection. The raw-flash contract crosses the port protocol intact
// (an FTL with FlashBack, its groomer's controller-side copies, parity staging and
// accumulators, runs over it); ownership is the card's: two claims without force, one
// wins; a takeover fences the old owner, whose writes never reach the flash; a give-back
// attaches from the checkpoint; malformed messages and a card that goes away are errors,
// not hangs.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "tests/testutil/temp_dir.h"
#include "vsl/card/card.h"
#include "vsl/card/shared_card.h"
#include "vsl/card/shared_wire.h"
#include "vsl/core/random.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::testing {
namespace {

using card::Card;
using card::CardOptions;
using card::Lun;
using card::LunState;

std::vector<uint8_t> Pattern(uint64_t lba, uint64_t version, uint32_t bytes) {
  std::vector<uint8_t> v(bytes);
  Rng((lba * 1000003) ^ (version << 40) ^ 0x5eed).Fill(v.data(), bytes);
  return v;
}

class SharedCardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = simcard::FindProfile("duo-slc-small");
    ASSERT_TRUE(p.ok());
    simcard::CreateOptions co;
    co.blocks_per_lun = 16;
    dir_ = tmp_.Sub("card");
    ASSERT_TRUE(simcard::SimCard::Create(dir_, *p, co).ok());
    StartServer();
  }
  void StartServer() {
    auto s = card::CardServer::Start(dir_, {});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  std::unique_ptr<Card> Host(uint32_t id, std::vector<uint32_t> luns, DurNs lease = 2 * kSec) {
    auto b = card::MakeSharedBackend(dir_);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return nullptr;
    CardOptions o;
    o.sharing.host_id = id;
    o.sharing.luns = std::move(luns);
    o.sharing.lease_ns = lease;
    o.copy_relocation = CardOptions::CopyRelocation::kOn;  // the copies cross the port too
    auto c = Card::Open(std::move(b).value(), o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  static Status Write(Lun& l, uint64_t lba, const std::vector<uint8_t>& data, bool fua = false) {
    return l.Call([&l, lba, &data, fua](Lun::Done d) {
      if (l.ftl() == nullptr) return d(Status::FailedPrecondition("offline"));
      l.ftl()->Write(lba, static_cast<uint32_t>(data.size() / l.ftl()->sector_bytes()), data.data(), fua,
                     std::move(d));
    });
  }
  static Status Read(Lun& l, uint64_t lba, std::vector<uint8_t>* out) {
    return l.Call([&l, lba, out](Lun::Done d) {
      if (l.ftl() == nullptr) return d(Status::FailedPrecondition("offline"));
      out->assign(l.ftl()->sector_bytes(), 0);
      l.ftl()->Read(lba, 1, out->data(), std::move(d));
    });
  }
  static uint64_t Sectors(Lun& l) {
    uint64_t n = 0;
    EXPECT_TRUE(l.Call([&l, &n](Lun::Done d) {
      if (l.ftl() != nullptr) n = l.ftl()->sectors();
      d(Status::Ok());
    }).ok());
    return n;
  }
  // Formats the card from one host (every LUN), leaving them attached there.
  void FormatAll(Card& c) {
    ftl::FormatOptions fo;
    for (uint32_t k = 0; k < c.controllers(); ++k) {
      ASSERT_TRUE(c.FormatController(k, card::PipeMode::kDual, fo).ok());
    }
  }
  static bool WaitFor(const std::function<bool()>& f, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (f()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return f();
  }

  TempDir tmp_;
  std::string dir_;
  std::unique_ptr<card::CardServer> server_;
};

// An FTL over the port protocol: overwrites past the LUN's size make the groomer copy
// inside the controller (Copy with accumulators) and park row parity (Stage); what was
// written reads back, through a detach and an attach from the checkpoint.
TEST_F(SharedCardTest, AnFtlRunsOverThePortProtocol) {
  auto a = Host(1, {});
  ASSERT_TRUE(a);
  FormatAll(*a);
  ASSERT_TRUE(a->AttachAll().ok());
  Lun& l = *a->lun(0);
  ASSERT_EQ(l.state(), LunState::kOnline) << l.error();
  const uint64_t n = Sectors(l);
  ASSERT_GT(n, 1000u);
  const uint32_t sb = 4096;
  const uint64_t span = n / 2;
  std::map<uint64_t, uint64_t> version;
  Rng rng(7);
  // Two and a half times the span in random overwrites: the groomer must run.
  for (uint64_t i = 0; i < span * 5 / 2; ++i) {
    const uint64_t lba = rng.Below(span);
    const uint64_t v = ++version[lba];
    ASSERT_TRUE(Write(l, lba, Pattern(lba, v, sb), i % 97 == 0).ok()) << i;
  }
  std::vector<uint8_t> got;
  for (const auto& [lba, v] : version) {
    ASSERT_TRUE(Read(l, lba, &got).ok()) << lba;
    ASSERT_EQ(got, Pattern(lba, v, sb)) << lba;
  }
  uint64_t copies = 0, stages = 0;
  ASSERT_TRUE(l.Call([&l, &copies, &stages](Lun::Done d) {
    copies = l.ftl()->stats().copy_pages;
    stages = l.ftl()->stats().parity_stages;
    d(Status::Ok());
  }).ok());
  EXPECT_GT(copies, 0u) << "the groomer copied inside the controller";
  EXPECT_GT(stages, 0u) << "row parity was staged on the card";
  ASSERT_TRUE(a->DetachAll().ok());
  ASSERT_TRUE(a->AttachAll().ok());
  bool from_checkpoint = false;
  ASSERT_TRUE(l.Call([&l, &from_checkpoint](Lun::Done d) {
    from_checkpoint = l.ftl()->attach_info().from_checkpoint;
    d(Status::Ok());
  }).ok());
  EXPECT_TRUE(from_checkpoint);
  for (const auto& [lba, v] : version) {
    ASSERT_TRUE(Read(l, lba, &got).ok()) << lba;
    ASSERT_EQ(got, Pattern(lba, v, sb)) << lba;
  }
}

// Active-active: each host serves its own LUNs; neither can attach the other's.
TEST_F(SharedCardTest, TwoHostsServeTheirOwnLunsAndAreRefusedTheOthers) {
  {
    auto f = Host(1, {});
    ASSERT_TRUE(f);
    FormatAll(*f);
  }
  auto a = Host(1, {0, 1});
  auto b = Host(2, {2, 3});
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AttachAll().ok());
  ASSERT_TRUE(b->AttachAll().ok());
  for (uint32_t i = 0; i < 4; ++i) {
    Card& mine = i < 2 ? *a : *b;
    Card& other = i < 2 ? *b : *a;
    EXPECT_EQ(mine.lun(i)->state(), LunState::kOnline) << i;
    EXPECT_EQ(other.lun(i)->state(), LunState::kElsewhere) << i;
    ASSERT_TRUE(Write(*mine.lun(i), 3, Pattern(3, i, 4096)).ok());
  }
  // Each host governs its half of the card's NAND power budget, so together they keep
  // the card's limit.
  EXPECT_DOUBLE_EQ(a->governor().budget_share(), 0.5);
  EXPECT_DOUBLE_EQ(b->governor().budget_share(), 0.5);
  // Attaching another host's LUN without force is refused, naming the holder.
  Lun& theirs = *a->lun(2);
  const Status s = theirs.Call([&theirs](Lun::Done d) { theirs.Attach(std::move(d)); });
  EXPECT_EQ(s.code(), StatusCode::kBusy) << s.ToString();
  EXPECT_NE(s.ToString().find("held by host 2"), std::string::npos) << s.ToString();
  EXPECT_EQ(theirs.state(), LunState::kElsewhere);
  EXPECT_DOUBLE_EQ(a->governor().budget_share(), 0.5);
  ASSERT_TRUE(b->lun(3)->Call([l = b->lun(3)](Lun::Done d) { l->Release(std::move(d)); }).ok());
  EXPECT_DOUBLE_EQ(b->governor().budget_share(), 0.25);
  std::vector<uint8_t> got;
  ASSERT_TRUE(Read(*b->lun(2), 3, &got).ok());
  EXPECT_EQ(got, Pattern(3, 2, 4096));
}

// Two hosts race for one free LUN without force: exactly one wins.
TEST_F(SharedCardTest, TwoClaimsWithoutForceExactlyOneWins) {
  {
    auto f = Host(1, {});
    ASSERT_TRUE(f);
    FormatAll(*f);
  }  // released cleanly: nobody holds the LUNs
  auto a = Host(1, {3});
  auto b = Host(2, {3});
  ASSERT_TRUE(a && b);
  Status sa, sb;
  std::thread ta([&] { sa = a->lun(3)->Call([l = a->lun(3)](Lun::Done d) { l->Attach(std::move(d)); }); });
  std::thread tb([&] { sb = b->lun(3)->Call([l = b->lun(3)](Lun::Done d) { l->Attach(std::move(d)); }); });
  ta.join();
  tb.join();
  EXPECT_NE(sa.ok(), sb.ok()) << sa.ToString() << " / " << sb.ToString();
  const Status& lost = sa.ok() ? sb : sa;
  EXPECT_EQ(lost.code(), StatusCode::kBusy) << lost.ToString();
  EXPECT_NE(lost.ToString().find("is held by host"), std::string::npos) << lost.ToString();
  Card& winner = sa.ok() ? *a : *b;
  EXPECT_EQ(winner.lun(3)->state(), LunState::kOnline);
  EXPECT_TRUE(Write(*winner.lun(3), 1, Pattern(1, 1, 4096)).ok());
}

// Takeover by force while the owner writes: every write the owner had acknowledged is
// on the new owner's LUN; the old owner is fenced (its later writes fail and reach no
// flash) and says so; give-back attaches from the checkpoint.
TEST_F(SharedCardTest, TakeoverFencesTheOwnerAndGiveBackUsesTheCheckpoint) {
  {
    auto f = Host(1, {});
    ASSERT_TRUE(f);
    FormatAll(*f);
  }
  auto a = Host(1, {0});
  auto b = Host(2, {1});
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AttachAll().ok());
  Lun& la = *a->lun(0);
  ASSERT_EQ(la.state(), LunState::kOnline);
  // A writes from a thread, version by version, until it fails.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> acked{0};
  std::map<uint64_t, uint64_t> acked_version;  // the writer's own (read after join)
  std::thread writer([&] {
    for (uint64_t i = 0; !stop; ++i) {
      const uint64_t lba = i % 512;
      if (!Write(la, lba, Pattern(lba, i + 1, 4096), i % 5 == 0).ok()) break;
      acked_version[lba] = i + 1;
      ++acked;
    }
  });
  ASSERT_TRUE(WaitFor([&] { return acked >= 300; }, 60));
  Lun& lb = *b->lun(0);
  const Status t = lb.Call([&lb](Lun::Done d) { lb.Takeover(true, std::move(d)); });
  ASSERT_TRUE(t.ok()) << t.ToString();
  ASSERT_TRUE(WaitFor([&] { return la.state() == LunState::kFenced; }, 10)) << card::LunStateName(la.state());
  stop = true;
  writer.join();
  EXPECT_NE(la.error().find("host 2"), std::string::npos) << la.error();
  // After the fence nothing A writes lands: A's LUN has no FTL; B reads every version A
  // had acknowledged (or a later one A wrote before the claim that B sees, never older).
  EXPECT_FALSE(Write(la, 0, Pattern(0, 999999, 4096)).ok());
  std::vector<uint8_t> got;
  for (const auto& [lba, v] : acked_version) {
    ASSERT_TRUE(Read(lb, lba, &got).ok()) << lba;
    bool match = got == Pattern(lba, v, 4096) || got == Pattern(lba, v + 512, 4096);
    EXPECT_TRUE(match) << "acknowledged write of sector " << lba << " (version " << v << ") lost";
  }
  ASSERT_TRUE(Write(lb, 7, Pattern(7, 1u << 30, 4096)).ok());
  // Give-back: B releases (checkpoint), A takes it without force and attaches from it.
  ASSERT_TRUE(lb.Call([&lb](Lun::Done d) { lb.Release(std::move(d)); }).ok());
  EXPECT_EQ(lb.state(), LunState::kElsewhere);
  const Status back = la.Call([&la](Lun::Done d) { la.Takeover(false, std::move(d)); });
  ASSERT_TRUE(back.ok()) << back.ToString();
  bool from_checkpoint = false;
  ASSERT_TRUE(la.Call([&la, &from_checkpoint](Lun::Done d) {
    from_checkpoint = la.ftl()->attach_info().from_checkpoint;
    d(Status::Ok());
  }).ok());
  EXPECT_TRUE(from_checkpoint) << "give-back attaches without a scan";
  ASSERT_TRUE(Read(la, 7, &got).ok());
  EXPECT_EQ(got, Pattern(7, 1u << 30, 4096));
}

// A host that stops renewing loses its LUN to a host in automatic mode once its lease
// runs out; the paused one, resumed, finds itself fenced.
TEST_F(SharedCardTest, AutomaticTakeoverAfterTheLeaseRunsOut) {
  {
    auto f = Host(1, {});
    ASSERT_TRUE(f);
    FormatAll(*f);
  }
  auto a = Host(1, {0}, 400 * kMs);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->AttachAll().ok());
  ASSERT_TRUE(Write(*a->lun(0), 5, Pattern(5, 1, 4096), true).ok());
  // A's engine stalls (as a paused process would): no renewals.
  std::atomic<bool> release{false};
  std::thread stall([&] {
    (void)a->lun(0)->Call([&release](Lun::Done d) {
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      d(Status::Ok());
    });
  });
  CardOptions o;
  auto bb = card::MakeSharedBackend(dir_);
  ASSERT_TRUE(bb.ok());
  o.sharing.host_id = 2;
  o.sharing.luns = {1};
  o.sharing.lease_ns = 400 * kMs;
  o.sharing.auto_takeover = true;
  auto b = Card::Open(std::move(bb).value(), o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return (*b)->lun(0)->state() == LunState::kOnline; }, 20))
      << card::LunStateName((*b)->lun(0)->state()) << " " << (*b)->lun(0)->error();
  std::vector<uint8_t> got;
  ASSERT_TRUE(Read(*(*b)->lun(0), 5, &got).ok());
  EXPECT_EQ(got, Pattern(5, 1, 4096));
  release = true;
  stall.join();
  ASSERT_TRUE(WaitFor([&] { return a->lun(0)->state() == LunState::kFenced; }, 10));
}

// A 512-byte sector format and a die that dies under writes, on a shared card: the die
// failure goes through the card's fault path over the control link, FlashBack remaps it,
// and every sector written reads back.
TEST_F(SharedCardTest, SmallSectorsAndADeadDieOverTheSharedCard) {
  auto a = Host(1, {});
  ASSERT_TRUE(a);
  ftl::FormatOptions fo;
  fo.sector_bytes = 512;
  for (uint32_t k = 0; k < a->controllers(); ++k) {
    ASSERT_TRUE(a->FormatController(k, card::PipeMode::kDual, fo).ok());
  }
  ASSERT_TRUE(a->AttachAll().ok());
  Lun& l = *a->lun(0);
  std::map<uint64_t, uint64_t> version;
  auto write = [&](uint64_t lba, uint64_t v) {
    version[lba] = v;
    return Write(l, lba, Pattern(lba, v, 512));
  };
  for (uint64_t lba = 0; lba < 600; ++lba) ASSERT_TRUE(write(lba, 1).ok()) << lba;
  Status s;
  a->RunOnPipe(0, [&] { s = a->backend().InjectDieFailure(0, 1); });
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (uint64_t lba = 300; lba < 900; ++lba) ASSERT_TRUE(write(lba, 2).ok()) << lba;
  std::vector<uint8_t> got;
  for (const auto& [lba, v] : version) {
    ASSERT_TRUE(Read(l, lba, &got).ok()) << lba;
    ASSERT_EQ(got, Pattern(lba, v, 512)) << lba;
  }
  EXPECT_EQ(a->backend().PipeCounters(0).failed_dies, 1u);
}

// Garbage on the card's socket closes that connection with an error and leaves the
// card serving everyone else.
TEST_F(SharedCardTest, MalformedMessagesCloseOnlyTheirConnection) {
  auto a = Host(1, {});
  ASSERT_TRUE(a);
  FormatAll(*a);
  ASSERT_TRUE(a->AttachAll().ok());
  auto raw = [&](const std::vector<uint8_t>& hello, const std::vector<uint8_t>& then) {
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = card::SharedSocketPath(dir_);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_TRUE(card::wire::Send(fd, hello));
    std::vector<uint8_t> msg;
    EXPECT_TRUE(card::wire::Receive(fd, &msg));  // welcome or refusal
    card::wire::Header h;
    EXPECT_TRUE(card::wire::Unpack(msg, &h));
    if (!then.empty()) {
      EXPECT_TRUE(card::wire::Send(fd, then));
      EXPECT_FALSE(card::wire::Receive(fd, &msg)) << "the card closes the connection";
    }
    ::close(fd);
    return h.type;
  };
  const uint64_t before = server_->malformed();
  EXPECT_EQ(raw({1, 2, 3}, {}), static_cast<uint8_t>(card::wire::Type::kRefused));
  card::wire::Hello hello;
  hello.h.type = static_cast<uint8_t>(card::wire::Type::kHello);
  hello.pipe = 7;  // no such pipe
  EXPECT_EQ(raw(card::wire::Pack(hello), {}), static_cast<uint8_t>(card::wire::Type::kRefused));
  hello.pipe = 0;
  card::wire::ProgramMsg p;  // announces data it does not carry
  p.h.type = static_cast<uint8_t>(card::wire::Type::kProgram);
  p.has_data = 1;
  EXPECT_EQ(raw(card::wire::Pack(hello), card::wire::Pack(p)), static_cast<uint8_t>(card::wire::Type::kWelcome));
  card::wire::Header odd;
  odd.type = 200;
  EXPECT_EQ(raw(card::wire::Pack(hello), card::wire::Pack(odd)), static_cast<uint8_t>(card::wire::Type::kWelcome));
  EXPECT_GE(server_->malformed(), before + 3);
  ASSERT_TRUE(Write(*a->lun(0), 1, Pattern(1, 1, 4096)).ok());
  std::vector<uint8_t> got;
  ASSERT_TRUE(Read(*a->lun(0), 1, &got).ok());
  EXPECT_EQ(got, Pattern(1, 1, 4096));
}

// The card going away (its process stops) fails the hosts' I/O; nothing hangs.
TEST_F(SharedCardTest, ACardThatGoesAwayFailsIoWithoutHanging) {
  auto a = Host(1, {});
  ASSERT_TRUE(a);
  FormatAll(*a);
  ASSERT_TRUE(a->AttachAll().ok());
  ASSERT_TRUE(Write(*a->lun(0), 1, Pattern(1, 1, 4096)).ok());
  server_.reset();
  std::vector<uint8_t> got;
  EXPECT_FALSE(Write(*a->lun(0), 2, Pattern(2, 1, 4096), true).ok());
  EXPECT_FALSE(Read(*a->lun(0), 1, &got).ok());
  a.reset();  // closes without hanging
  // No server: a host is told how to start one.
  auto b = card::MakeSharedBackend(dir_);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().ToString().find("vslflash serve"), std::string::npos) << b.status().ToString();
}

// One message per Receive, sized to it: a header-only completion does not cost a buffer of
// the largest message (that was an allocation and a 512 KiB fill per message, on both
// sides of every port); a message over the limit still ends the connection.
TEST(SharedWireTest, ReceiveTakesOneMessageSizedToItselfAndRefusesOneOverTheLimit) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  // Room for the oversize message below: a datagram must fit the send buffer whole.
  const int sndbuf = 4 << 20;
  ASSERT_EQ(::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
  std::vector<uint8_t> small(24, 0xA5), page = Pattern(7, 1, 8640), too_big(card::wire::kMaxMessage + 1, 1);
  ASSERT_TRUE(card::wire::Send(sv[0], small));
  ASSERT_TRUE(card::wire::Send(sv[0], page));
  ASSERT_TRUE(card::wire::Send(sv[0], small));
  std::vector<uint8_t> msg;
  ASSERT_TRUE(card::wire::Receive(sv[1], &msg));
  EXPECT_EQ(msg, small);
  EXPECT_LT(msg.capacity(), 4096u) << "a header-sized message took a large buffer";
  ASSERT_TRUE(card::wire::Receive(sv[1], &msg));
  EXPECT_EQ(msg, page);
  ASSERT_TRUE(card::wire::Receive(sv[1], &msg));
  EXPECT_EQ(msg, small);
  ASSERT_TRUE(card::wire::Send(sv[0], too_big));
  EXPECT_FALSE(card::wire::Receive(sv[1], &msg));
  ::close(sv[0]);
  EXPECT_FALSE(card::wire::Receive(sv[1], &msg)) << "the peer is gone";
  ::close(sv[1]);
}

}  // namespace
}  // namespace vsl::testing
