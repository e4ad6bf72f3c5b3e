"""Issue 31 item 1: the PHP adapter tags queued mailables, notifications,
broadcast events and listeners as Horizon does (php/src/Tags.php): a
wrapper is tagged by what it carries (the mailable, the notification (not
its notifiables), the event), explicit tags() first, else the Eloquent
models (and the models of an Eloquent collection) among its properties; a
queued listener by its own tags($event) and by its event's; and such a job
is silenced when what it carries implements Horizon's Silenced. Laravel's own
wrapper classes: the host's Laravel and Laravel 13 in its Debian root
(laravel_roots.py); no database."""
import json
import subprocess

import pytest

from conftest import LARAVEL_APP, ROOT
from laravel_roots import laravel_version, version_app  # noqa: F401 (fixtures)

SCRIPT = r"""<?php
require is_file($argv[1].'/bootstrap/autoload.php') ? $argv[1].'/bootstrap/autoload.php' : $argv[1].'/vendor/autoload.php';
require $argv[2].'/php/src/Tags.php';
use Illuminate\Database\Eloquent\Collection;
use Illuminate\Database\Eloquent\Model;
use Qpool\Laravel\Tags;

class Customer extends Model { protected $guarded = []; }
function customer($id) { return new Customer(['id' => $id]); }
class Invoice extends Illuminate\Mail\Mailable { public $customer; public $note = 'x';
    public function __construct($c) { $this->customer = $c; } }
class TaggedInvoice extends Invoice { public function tags() { return ['invoice:9', 'mail']; } }
class Paid extends Illuminate\Notifications\Notification { public $customer;
    public function __construct($c) { $this->customer = $c; } public function via($n) { return ['mail']; } }
class Shipped { public $customers; public function __construct($c) { $this->customers = $c; }
    public function broadcastOn() { return []; } }
class TaggedShipped extends Shipped { public function tags() { return ['shipment']; } }
class SendReceipt { public function tags($event) { return ['listener', 'for:'.get_class($event)]; } }
class Audit { public function handle($event) {} }
class Import { public $rows; protected $owner; private $skipped = 3;
    public function __construct($rows, $owner) { $this->rows = $rows; $this->owner = $owner; } }

eval('namespace Laravel\\Horizon\\Contracts; interface Silenced {}'); // Horizon's, by name
class QuietInvoice extends Invoice implements Laravel\Horizon\Contracts\Silenced {}
class QuietPaid extends Paid implements Laravel\Horizon\Contracts\Silenced {}
class QuietShipped extends Shipped implements Laravel\Horizon\Contracts\Silenced {}
class QuietAudit extends Audit implements Laravel\Horizon\Contracts\Silenced {}
class QuietImport extends Import implements Laravel\Horizon\Contracts\Silenced {}

$both = new Collection([customer(1), customer(2)]);
$out = [
  'mailable' => Tags::of(new Illuminate\Mail\SendQueuedMailable(new Invoice(customer(7)))),
  'mailable_tags' => Tags::of(new Illuminate\Mail\SendQueuedMailable(new TaggedInvoice(customer(7)))),
  'notification' => Tags::of(new Illuminate\Notifications\SendQueuedNotifications(
      new Collection([customer(40)]), new Paid(customer(8)), ['mail'])),
  'broadcast' => Tags::of(new Illuminate\Broadcasting\BroadcastEvent(new Shipped($both))),
  'broadcast_tags' => Tags::of(new Illuminate\Broadcasting\BroadcastEvent(new TaggedShipped($both))),
  'listener_tags' => Tags::of(new Illuminate\Events\CallQueuedListener(SendReceipt::class, 'handle', [new Shipped($both)])),
  'listener' => Tags::of(new Illuminate\Events\CallQueuedListener(Audit::class, 'handle', [new Shipped($both)])),
  'listener_no_event' => Tags::of(new Illuminate\Events\CallQueuedListener(Audit::class, 'handle', ['a string'])),
  'job' => Tags::of(new Import(new Collection([customer(3), customer(3), customer(4)]), customer(5))),
];
$silenced = function ($job) { Tags::$command = $job; return Tags::silenced(); }; // as the handler asks
$out['silenced'] = array_map($silenced, [
  new Illuminate\Mail\SendQueuedMailable(new QuietInvoice(customer(7))),
  new Illuminate\Notifications\SendQueuedNotifications(new Collection([customer(40)]), new QuietPaid(customer(8)), ['mail']),
  new Illuminate\Broadcasting\BroadcastEvent(new QuietShipped($both)),
  new Illuminate\Events\CallQueuedListener(QuietAudit::class, 'handle', [new Shipped($both)]),
  new QuietImport($both, customer(5)),
]);
$out['loud'] = array_map($silenced, [
  new Illuminate\Mail\SendQueuedMailable(new Invoice(customer(7))),
  new Illuminate\Notifications\SendQueuedNotifications(new Collection([customer(40)]), new Paid(customer(8)), ['mail']),
  new Illuminate\Broadcasting\BroadcastEvent(new Shipped($both)),
  new Illuminate\Events\CallQueuedListener(Audit::class, 'handle', [new QuietShipped($both)]),
  new Illuminate\Events\CallQueuedListener('No\\Such\\Listener', 'handle', []),
  new Import($both, customer(5)), null, 'a string',
]);
echo json_encode($out), "\n";
"""


def test_wrappers_are_tagged_by_what_they_carry(tmp_path):
    script = tmp_path / "tags.php"
    script.write_text(SCRIPT)
    check(["php", str(script), str(LARAVEL_APP), str(ROOT)])


@pytest.mark.parametrize("laravel_version", ["13"], indirect=True)
def test_the_same_on_laravel_13(version_app):
    (version_app.work / "tags.php").write_text(SCRIPT)
    inner = version_app.work_inner
    check(version_app.version.prefix() + ["php", str(inner / "tags.php"), str(version_app.app_inner), str(inner)])


def check(argv):
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["mailable"] == ["Customer:7"], got
    assert got["mailable_tags"] == ["invoice:9", "mail"], got  # explicit tags() win over the models
    assert got["notification"] == ["Customer:8"], got  # the notification's, not the notifiable's (40)
    assert got["broadcast"] == ["Customer:1", "Customer:2"], got  # an Eloquent collection's models
    assert got["broadcast_tags"] == ["shipment"], got
    assert got["listener_tags"] == ["listener", "for:Shipped", "Customer:1", "Customer:2"], got
    assert got["listener"] == ["Customer:1", "Customer:2"], got  # no tags(): the event's
    assert got["listener_no_event"] == [], got
    assert got["job"] == ["Customer:3", "Customer:4", "Customer:5"], got  # any visibility, once each
    # Horizon's Silenced on what the wrapper carries (a listener: its class, not its event)
    assert got["silenced"] == [True] * 5, got
    assert got["loud"] == [False] * 8, got
