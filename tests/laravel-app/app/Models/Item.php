<?php

namespace App\Models;

use Illuminate\Database\Eloquent\Model;

/** A row of parity_items: the model the deleteWhenMissingModels jobs carry. */
class Item extends Model
{
    protected $table = 'parity_items';

    public $timestamps = false;

    protected $guarded = [];
}
